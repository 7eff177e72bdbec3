"""The pool's MCP sessions: one supervised connection per declared server.

Each server has one supervisor task. It starts the server (spawn or connect,
initialize, list the tools) within the server's ``start_timeout``, then watches the
connection: its transport's end (a stdio server's stdout or process), or a ping not
answered within :data:`PING_TIMEOUT` (one every :data:`PING_INTERVAL`), ends it. A
call answered "connection closed" (JSON-RPC ``-32000``) while the transport runs fails
alone, and the server is pinged at once: that answer cannot force a restart. A server
that cannot start or whose connection ended is started again after a backoff (1s,
doubling, at most :data:`MAX_BACKOFF`), for as long as the pool is open. Meanwhile its tools'
calls fail at once with :class:`McpServerError` naming the server (an error result the
model sees): no failure of a server ends a run or the pool.

Every failure is logged on the ``subagent`` logger and sent to the pool's events as an
``mcp_server_error`` event (``error`` names the server and says what happened).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from .._errors import SpecError
from .._events import Event, EventKind
from ._client import MAX_ERROR, connect, list_tools
from ._config import McpServer, McpServerError
from ._link import Link

if TYPE_CHECKING:
    import mcp_types
    from mcp import ClientSession

    from .._stream import Stream
    from ._tools import McpTool

logger = logging.getLogger("subagent")

#: Seconds between pings of an idle-looking connection.
PING_INTERVAL = 15.0
#: Seconds a ping may take before the connection counts as stopped.
PING_TIMEOUT = 10.0
#: The first wait before a restart; it doubles up to :data:`MAX_BACKOFF`.
MIN_BACKOFF = 1.0
#: The longest wait between restarts.
MAX_BACKOFF = 60.0
#: Seconds a live session has, when the pool closes, to send what is queued (the
#: ``notifications/cancelled`` of a call cancelled just before) and end its session
#: (an HTTP server's ``DELETE``, which cancels its handlers); past them it is cut.
CLOSE_TIMEOUT = 3.0


class _Connection:
    """The live state of one server; only its supervisor writes it."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.session: ClientSession | None = None
        self.link = Link()  # the current session's transport
        self.tools: dict[str, mcp_types.Tool] | None = None  # the latest listing
        self.problem = "it has not started yet"
        self.starts = 0
        self.failures = 0
        self.pings = 0  # pings sent, on time or at once
        self.settled = trio.Event()  # the first start ended (either way)
        self.wake = trio.Event()  # the watcher should look now (a new one after each look)
        self.closed = False  # a call found the current session closed
        # The supervisor's scope: shielded, so that the pool closing ends a live
        # session in order (see McpSessions._close) rather than cutting it.
        self.guard = trio.CancelScope(shield=True)

    def wake_up(self) -> None:
        self.wake.set()

    def lost(self, session: ClientSession) -> None:
        # A call found ``session`` closed: no more calls go to it, and the supervisor
        # starts the server again.
        if self.session is session:
            self.session = None
            self.problem = "closed the connection; it is being started again"
            self.closed = True
            self.wake.set()

    def doubt(self, session: ClientSession) -> None:
        # A call was answered "connection closed" while the transport is up: the
        # supervisor pings the server now rather than at the next interval.
        if self.session is session:
            self.wake.set()

    def name_error(self, text: str) -> McpServerError:
        return McpServerError(f"MCP server {self.server.name!r} {text}")


class McpSessions:
    """The MCP servers of one pool and their sessions, shared by every run at every
    depth. Open with :func:`open_mcp_sessions` (``open_pool(mcp=...)`` does)."""

    def __init__(self, servers: Sequence[McpServer], events: Stream | None) -> None:
        names = [s.name for s in servers]
        for name in names:
            if names.count(name) > 1:
                raise SpecError(f"MCP server {name!r} is declared twice")
        self._connections = {s.name: _Connection(s) for s in servers}
        self._events = events
        self._closing = False

    def __repr__(self) -> str:
        up = sorted(n for n, c in self._connections.items() if c.session is not None)
        return f"<subagent.mcp.McpSessions servers={sorted(self._connections)} up={up}>"

    @property
    def names(self) -> tuple[str, ...]:
        """The declared servers' names."""
        return tuple(self._connections)

    def is_up(self, name: str) -> bool:
        """Whether server ``name`` has a live session now; not a checkpoint."""
        return self._connection(name).session is not None

    def _connection(self, name: str) -> _Connection:
        connection = self._connections.get(name)
        if connection is None:
            known = ", ".join(sorted(self._connections)) or "none"
            raise SpecError(f"no MCP server is named {name!r}; the pool's servers: {known}")
        return connection

    def tools(
        self, name: str, *only: str, taken: Collection[str] = ()
    ) -> tuple[McpTool, ...]:
        """Tools of server ``name``: all it listed, or those named in ``only``; not a
        checkpoint.

        Of all it listed, a tool whose name is in ``taken`` (the agent's other tools:
        a built-in's, another server's) is left out, and reported as an
        ``mcp_server_error`` event (and a log line). A tool named in ``only`` is not:
        the agent then has two tools of one name, which registering it refuses.

        A server that has not started yet has listed nothing: it gives no tools, and
        each tool named in ``only`` gets a stand-in with an open schema, whose calls
        go to the server once it runs.

        Raises:
          SpecError: no server has that name, or it listed no tool of a name in ``only``.
        """
        from ._tools import McpTool, placeholder

        connection = self._connection(name)
        listed = connection.tools
        server = connection.server
        if listed is None:
            return tuple(placeholder(self, server, tool) for tool in only)
        if not only:
            for tool in sorted(set(listed) & set(taken)):
                self._report_nowait(
                    connection, f"tool {tool!r} is left out: the agent has a tool of that name"
                )
            return tuple(
                McpTool.from_listing(self, server, t)
                for t in listed.values() if t.name not in taken
            )
        missing = [t for t in only if t not in listed]
        if missing:
            raise SpecError(
                f"MCP server {name!r} has no tool {missing[0]!r}; "
                f"its tools: {', '.join(sorted(listed)) or 'none'}"
            )
        return tuple(McpTool.from_listing(self, server, listed[t]) for t in only)

    async def call(
        self, name: str, tool: str, arguments: dict[str, Any]
    ) -> mcp_types.CallToolResult:
        """Call ``tool`` of server ``name``. A checkpoint; cancelling it cancels the call
        on the server (the SDK sends ``notifications/cancelled``).

        Raises:
          McpServerError: the server is not running, the connection closed during the
            call, or the server refused the call (a protocol error, not a tool error).
        """
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        connection = self._connection(name)
        session, link = connection.session, connection.link
        if session is None:
            await trio.lowlevel.checkpoint()
            raise connection.name_error(f"is not available: {connection.problem}")
        try:
            return await session.call_tool(tool, arguments)
        except MCPError as exc:
            message = connection.server.masked(exc.message)[:MAX_ERROR]
            if exc.code != CONNECTION_CLOSED:
                raise connection.name_error(f"refused the call: {message}") from None
            if link.ended:
                connection.lost(session)
                raise connection.name_error(
                    "closed the connection during the call; it will be started again"
                ) from None
            # The server (or the SDK, for one reply it could not read) says the
            # connection closed, yet the transport runs: only this call failed.
            connection.doubt(session)
            raise connection.name_error(
                f"failed the call: {message}; it is being pinged"
            ) from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            connection.lost(session)
            raise connection.name_error(f"cannot be reached: {type(exc).__name__}") from None

    # -- supervision ---------------------------------------------------------------

    def _close(self) -> None:
        # The pool closes: a server not running stops now; a live session ends in
        # order (its watcher returns, the SDK's transport flushes what is queued and
        # ends the session) within CLOSE_TIMEOUT. Not a checkpoint.
        self._closing = True
        for connection in self._connections.values():
            if connection.session is None:
                connection.guard.cancel()
            else:
                connection.guard.deadline = trio.current_time() + CLOSE_TIMEOUT
                connection.wake.set()

    async def _supervised(self, connection: _Connection) -> None:
        with connection.guard:
            await self._supervise(connection)

    async def _supervise(self, connection: _Connection) -> None:
        backoff = MIN_BACKOFF
        while not self._closing:
            problem = await self._run_once(connection)
            if self._closing:
                return
            connection.session = None
            connection.problem = problem = connection.server.masked(problem)
            connection.failures += 1
            connection.settled.set()
            await self._report(connection, problem)
            if self._closing:
                return
            await trio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _run_once(self, connection: _Connection) -> str:
        # One session, from start to end; returns why it ended (it never ends well),
        # with the end of a stdio server's stderr.
        server = connection.server
        connection.starts += 1
        connection.closed = False
        connection.wake = trio.Event()
        connection.link = link = Link(connection.wake_up)
        with trio.CancelScope(deadline=trio.current_time() + server.start_timeout) as start:
            try:
                async with connect(server, link) as session:
                    await session.initialize()
                    tools, problems = await list_tools(session)
                    start.deadline = math.inf
                    connection.tools = tools
                    connection.session = session
                    connection.problem = ""
                    connection.settled.set()
                    for problem in problems:
                        await self._report(connection, problem)
                    problem = await self._watch(connection, session)
            except BaseExceptionGroup as group:
                # The SDK's task groups report a transport's error (a refused connect,
                # a reset) beside a Cancelled when one of our scopes (the pool
                # closing, the start's deadline) was cancelled as it failed: that
                # cancel is ours and goes on to its scope; the error alone is a failure.
                failed, ours = group.split(Exception)
                if ours is not None:
                    raise ours from group
                assert failed is not None
                problem = f"failed: {link.reason}" if link.ended else _failure(failed)
            except Exception as exc:
                problem = f"failed: {link.reason}" if link.ended else _failure(exc)
            return link.described(problem)
        # Only the start's deadline lands here: the session had not started.
        return link.described(f"did not start within {server.start_timeout:g}s")

    async def _watch(self, connection: _Connection, session: ClientSession) -> str:
        # Pings every PING_INTERVAL, or at once when a call doubts the connection;
        # returns why the session ended.
        link = connection.link
        while True:
            with trio.move_on_after(PING_INTERVAL):
                await connection.wake.wait()
            connection.wake = trio.Event()
            if self._closing:
                return "was closed with the pool"
            if link.ended:
                return link.reason
            if connection.closed:
                return "closed the connection"
            connection.pings += 1
            with trio.move_on_after(PING_TIMEOUT):
                try:
                    await session.send_ping()
                except Exception as exc:
                    return link.reason if link.ended else f"did not answer a ping: {_failure(exc)}"
                continue
            return f"did not answer a ping within {PING_TIMEOUT:g}s"

    def _report_nowait(self, connection: _Connection, problem: str) -> None:
        # As _report, for a caller that cannot wait: an event the stream has no room
        # for is left (the log line says it). Not a checkpoint.
        text = f"MCP server {connection.server.name!r} {connection.server.masked(problem)}"
        logger.warning("%s", text)
        if self._events is not None:
            with contextlib.suppress(trio.WouldBlock):
                self._events.send_nowait(Event((), EventKind.mcp_server_error, error=text))

    async def _report(self, connection: _Connection, problem: str) -> None:
        problem = connection.server.masked(problem)
        text = f"MCP server {connection.server.name!r} {problem}"
        logger.warning("%s", text)
        if self._events is not None:
            await self._events.send(Event((), EventKind.mcp_server_error, error=text))


def _failure(exc: BaseException) -> str:
    # What went wrong, from an exception or a group of them, without host paths
    # beyond what the exception itself says.
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return f"failed: {len(exc.exceptions)} errors, the first {_failure(exc.exceptions[0])}"
    if isinstance(exc, FileNotFoundError):
        return "failed to start: its command was not found"
    if isinstance(exc, OSError):
        return f"failed to start: {exc.strerror or type(exc).__name__}"
    text = str(exc)[:MAX_ERROR]
    return f"failed: {type(exc).__name__}: {text}" if text else f"failed: {type(exc).__name__}"


@asynccontextmanager
async def open_mcp_sessions(
    servers: Iterable[McpServer], events: Stream | None = None
) -> AsyncIterator[McpSessions]:
    """Start every server at once and yield their sessions once each has started or
    failed its first start (at most its ``start_timeout``). A checkpoint.

    Leaving the block closes every session: stdio servers are stopped and reaped.
    An exception from the block passes through unwrapped.

    Raises:
      SpecError: two servers have the same name.
      ImportError: servers are given but the ``mcp`` extra is not installed.
    """
    servers = tuple(servers)
    sessions = McpSessions(servers, events)
    if not servers:
        yield sessions
        return
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ImportError("MCP servers need the mcp extra: pip install 'subagent[mcp]'") from None

    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                for connection in sessions._connections.values():
                    nursery.start_soon(
                        sessions._supervised, connection,
                        name=f"mcp server {connection.server.name}",
                    )
                for connection in sessions._connections.values():
                    await connection.settled.wait()
                try:
                    yield sessions
                except BaseException as exc:
                    body_error = exc
                    raise
            finally:
                # The supervisors are shielded: every way out closes them.
                sessions._close()
    except BaseExceptionGroup as group:
        # The supervisors never raise: a group of the body's exception alone is it.
        if body_error is None or group.exceptions != (body_error,):
            raise
    else:
        return
    raise body_error
