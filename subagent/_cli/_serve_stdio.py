"""The stdio transport of ``subagent mcp`` (the pool as an MCP server), with a bound on
what the client writes: one request (one line of stdin) is at most
:data:`MAX_REQUEST` bytes and holds at most :data:`~._framing.MAX_VALUES` JSON values.

The SDK's ``stdio_server`` reads a line however long it grows. Here a longer line is
answered with a JSON-RPC error (``-32600``, ``id`` null) as soon as it passes the
bound, and skipped to its end: at most :data:`MAX_REQUEST` bytes of it are ever held.
A line with more values is answered the same way, without being parsed.
Like the SDK's transport, it claims the process's stdin and stdout while it serves: fd
0 reads the null device and fd 1 writes to stderr, so that nothing a tool or a child
process prints reaches the wire; both are restored when it ends.

The server is run through the SDK's ``MCPServer._lowlevel_server.run``, the call its
own ``run_stdio_async`` makes, which is not public: :func:`lowlevel_run` checks that it
is there and raises ``ImportError`` naming it when an SDK version lacks it.
"""

from __future__ import annotations

import contextlib
import fcntl
import inspect
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from ..mcp._framing import Lines, McpMessageError, check_values

#: The largest request (line of stdin) ``subagent mcp`` reads: 4 MiB.
MAX_REQUEST = 4 * 1024 * 1024
#: Seconds the replies already given may take to be written once the server ends.
FLUSH = 5.0



def _invalid(message: str) -> bytes:
    # JSON-RPC's "Invalid Request" answer, to no request id (none was read).
    error = {"code": -32600, "message": f"{message}; it was skipped"}
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode() + b"\n"


def _unreadable(line: bytes) -> bytes:
    # JSON-RPC's "Parse error" for a line that is not JSON, "Invalid Request" for JSON
    # that is no JSON-RPC message; to no request id (none can be trusted). JSON nested
    # past json's recursion limit cannot be told apart: it gets a parse error too.
    try:
        json.loads(line)
    except ValueError:
        error = {"code": -32700, "message": "the request is not JSON; it was skipped"}
    except RecursionError:
        error = {"code": -32700,
                 "message": "the request is nested too deeply to parse; it was skipped"}
    else:
        error = {"code": -32600,
                 "message": "the request is not a JSON-RPC message; it was skipped"}
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode() + b"\n"


#: The answer to a line past :data:`MAX_REQUEST`.
TOO_LONG = _invalid(f"the request is longer than {MAX_REQUEST} bytes (MAX_REQUEST)")


def lowlevel_run(server: Any) -> Callable[[Any, Any], Awaitable[None]]:
    """How to run ``server`` (the SDK's ``MCPServer``) over a pair of message streams:
    its low-level server's ``run`` with its initialization options. Not a checkpoint.

    Raises:
      ImportError: this version of the SDK has no such call (it is not public).
    """
    lowlevel = getattr(server, "_lowlevel_server", None)
    run = getattr(lowlevel, "run", None)
    options = getattr(lowlevel, "create_initialization_options", None)
    try:
        ok = callable(options) and inspect.iscoroutinefunction(run)
        ok = ok and len(inspect.signature(run).parameters) >= 3  # type: ignore[arg-type]
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ImportError(
            "subagent mcp needs the mcp SDK's MCPServer._lowlevel_server.run "
            "(mcp 2.x); the installed version has none"
        )
    assert lowlevel is not None and callable(options)
    init = options()

    async def serve(read_stream: Any, write_stream: Any) -> None:
        await lowlevel.run(read_stream, write_stream, init)

    return serve


async def serve_stdio(
    server: Any, *, on_eof: Callable[[], None] | None = None,
    on_cancel: Callable[[str], None] | None = None,
) -> None:
    """Serve ``server`` (the SDK's ``MCPServer``) over this process's stdin and stdout
    until the client closes stdin; ``on_eof()``, if given, is called once stdin has
    ended, before the server stops (and cancels the calls in flight), and
    ``on_cancel(request_id)`` as :func:`bounded_stdio_server` calls it. A checkpoint.

    Raises:
      ImportError: the SDK lacks the call the server is run through.
    """
    run = lowlevel_run(server)
    with _claimed() as (stdin, stdout):
        async with bounded_stdio_server(stdin, stdout, on_eof, on_cancel) as (
            read_stream, write_stream
        ):
            await run(read_stream, write_stream)


@contextlib.contextmanager
def _claimed() -> Iterator[tuple[int, int]]:
    # Private copies of fds 0 and 1 for the wire; fd 0 then reads the null device and
    # fd 1 writes to stderr, until the block ends.
    stdin = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    stdout = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    try:
        yield stdin, stdout
    finally:
        # What was printed meanwhile goes to stderr, where fd 1 still points.
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        # Not closed: an abandoned reader thread may still be blocked on them.


@asynccontextmanager
async def bounded_stdio_server(
    stdin: int, stdout: int, on_eof: Callable[[], None] | None = None,
    on_cancel: Callable[[str], None] | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's (read, write) message streams over the file descriptors ``stdin``
    and ``stdout``; a request line past :data:`MAX_REQUEST` is answered
    :data:`TOO_LONG` and skipped, one with more than ``MAX_VALUES`` JSON values
    likewise, and one that is not JSON (``-32700``) or not a JSON-RPC message
    (``-32600``) too. ``on_eof()``, if given, is called when ``stdin`` ends (or
    cannot be read), before the read stream ends; ``on_cancel(request_id)``, if
    given, when a ``notifications/cancelled`` is read, before the SDK is given it
    (the id as the SDK's ``Context.request_id`` spells it: ``str`` of the JSON id). A
    checkpoint.

    When the block ends, the replies already given are written (within
    :data:`FLUSH` seconds) and reading stops.
    """
    import anyio
    import mcp_types
    from mcp.shared.message import SessionMessage

    incoming, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
    writing = trio.Lock()

    async def send(data: bytes) -> None:
        async with writing:
            view = memoryview(data)
            while view:
                written = await trio.to_thread.run_sync(
                    os.write, stdout, view, abandon_on_cancel=True
                )
                view = view[written:]

    async def read() -> None:
        lines = Lines(MAX_REQUEST)
        async with incoming:
            while True:
                try:
                    chunk = await trio.to_thread.run_sync(
                        os.read, stdin, 65536, abandon_on_cancel=True
                    )
                except OSError:
                    chunk = b""
                if not chunk:
                    if on_eof is not None:
                        on_eof()
                    return
                for line in lines.feed(chunk):
                    if line is None:
                        await send(TOO_LONG)
                        continue
                    try:
                        check_values(line)
                    except McpMessageError as exc:
                        await send(_invalid(str(exc).replace("a message", "the request")))
                        continue
                    try:
                        item = SessionMessage(
                            mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        )
                    except ValueError:
                        # Answered here: the SDK only logs a line it cannot read.
                        await send(_unreadable(line))
                        continue
                    if on_cancel is not None:
                        _tell_cancel(item.message, on_cancel)
                    try:
                        await incoming.send(item)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return

    async def write() -> None:
        async with outgoing:
            async for message in outgoing:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await send(data.encode() + b"\n")

    async with trio.open_nursery() as nursery:
        reading = trio.CancelScope()

        async def read_until_done() -> None:
            with reading:
                await read()

        nursery.start_soon(read_until_done)
        nursery.start_soon(write)
        try:
            yield read_stream, write_stream
        finally:
            reading.cancel()
            await write_stream.aclose()
            nursery.cancel_scope.deadline = trio.current_time() + FLUSH


def _tell_cancel(message: Any, on_cancel: Callable[[str], None]) -> None:
    # on_cancel(str(id)) for a notifications/cancelled naming a request id (an int or
    # a str, as JSON-RPC ids are); any other message, nothing.
    if getattr(message, "method", None) != "notifications/cancelled":
        return
    params = getattr(message, "params", None)
    request_id = params.get("requestId") if isinstance(params, dict) else None
    if type(request_id) is int or type(request_id) is str:
        on_cancel(str(request_id))
