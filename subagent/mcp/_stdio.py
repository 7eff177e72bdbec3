"""The stdio transport with a bound on what the server writes: one message (one line of
stdout) is at most :data:`MAX_MESSAGE` bytes and holds at most
:data:`~._framing.MAX_VALUES` JSON values (counted before it is parsed).

The SDK's ``stdio_client`` reads a line however long it grows; this one ends the
connection instead (the server's calls fail, and it is started again). The server's
exit ends the connection too, even while a process it started holds its stdout open. It starts the
server in a new session (its own process group) with only the environment the SDK
passes on (``HOME``, ``PATH``, ...) plus the configured ``env``, and stops it when the
block ends: stdin closed, then SIGTERM and SIGKILL to the group, each after a grace of
:data:`GRACE` seconds, then reaped; whatever is left in the group then gets SIGKILL.
On Linux the server runs under the supervisor of :mod:`._reaper` (a subreaper, in a
process of its own: this one is left as it is), which gets the SIGTERM alone and kills
the server's whole tree, processes that left the group included, when the server ends,
``GRACE`` seconds after SIGTERM, or when the pool's process dies.
The stop is shielded and bounded. Its stderr goes through a pipe into a bounded tail
(:mod:`._stderr`), never to this process's stderr.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from ._config import McpServer
from ._framing import Lines, McpMessageError, check_values
from ._link import Link
from ._stderr import StderrTail

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

logger = logging.getLogger("subagent")

#: The largest message (line of stdout) a stdio server may send: 4 MiB.
MAX_MESSAGE = 4 * 1024 * 1024
#: Seconds a stopping server gets after stdin closes, and again after SIGTERM.
GRACE = 2.0


@asynccontextmanager
async def bounded_stdio(server: McpServer, link: Link) -> AsyncIterator[tuple[Any, Any]]:
    """Run ``server``'s command and yield the SDK's (read, write) message streams.

    ``link`` is told when the transport ends (before the SDK's read stream closes)
    and holds the tail of the server's stderr (read through a pipe, never inherited).

    A checkpoint. Raises ``OSError`` when the command cannot be started.
    """
    import anyio
    import mcp_types
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    assert server.command is not None
    reaper = _reaper_script()
    process = await _spawn(
        [server.command, *server.args], get_default_environment() | dict(server.env), reaper
    )
    incoming, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
    assert process.stdout is not None and process.stdin is not None
    assert process.stderr is not None
    stdout, stdin, stderr = process.stdout, process.stdin, process.stderr
    link.stderr = StderrTail(server)

    async def read() -> str:
        # Lines of stdout into messages until the connection ends; returns why. A
        # line past MAX_MESSAGE, or with more than MAX_VALUES JSON values, ends it.
        lines = Lines(MAX_MESSAGE)
        while True:
            try:
                chunk = await stdout.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            if not chunk:
                return "closed the connection"
            for line in lines.feed(chunk):
                try:
                    if line is None:
                        raise McpMessageError(
                            f"a message is larger than {MAX_MESSAGE} bytes (MAX_MESSAGE)"
                        )
                    check_values(line)
                except McpMessageError as exc:
                    logger.warning(
                        "MCP server %r broke a bound: %s; closing the connection",
                        server.name, exc,
                    )
                    return f"broke a bound: {exc}"
                try:
                    item: SessionMessage | Exception = SessionMessage(
                        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    )
                except ValueError as exc:
                    item = exc
                try:
                    await incoming.send(item)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return "closed the connection"

    async def write() -> None:
        async with outgoing:
            async for message in outgoing:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await stdin.send_all(data.encode() + b"\n")
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return

    reading = trio.CancelScope()

    async def read_until_exit() -> None:
        # The link ends before the SDK sees the read stream close: a call that then
        # fails with "connection closed" finds it ended.
        async with incoming:
            try:
                with reading:
                    link.end(await read())
            finally:
                link.end(f"exited with code {process.returncode}")

    async def watch() -> None:
        # A helper the server started may hold its stdout open after the server has
        # gone, so that no end of file ever comes: the server's exit ends the
        # connection, once what it wrote before has had GRACE seconds to be read.
        await process.wait()
        reading.deadline = trio.current_time() + GRACE

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_until_exit)
            nursery.start_soon(write)
            nursery.start_soon(watch)
            nursery.start_soon(link.stderr.read, stderr)
            try:
                yield read_stream, write_stream
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await _stop(process, supervised=reaper is not None)
            # What the server wrote just before it ended, still in the pipe.
            if isinstance(stderr, trio.lowlevel.FdStream):
                link.stderr.drain(stderr.fileno())
            await stderr.aclose()
            for stream in (read_stream, write_stream):
                await stream.aclose()


async def _spawn(argv: list[str], env: dict[str, str], reaper: str | None) -> trio.Process:
    # The server in a new session, through the supervisor script ``reaper`` if there is
    # one. Raises OSError when the command cannot be started.
    pipes: dict[str, Any] = {
        "stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE,
    }
    if reaper is None:
        return await trio.lowlevel.open_process(
            argv, env=env, start_new_session=True, **pipes
        )
    status, status_w = os.pipe()
    try:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-I", "-S", reaper, str(status_w), str(GRACE), "--", *argv],
            env=env, start_new_session=True, pass_fds=(status_w,), **pipes,
        )
    except BaseException:
        os.close(status)
        raise
    finally:
        os.close(status_w)
    try:
        said = await _read_status(status)
    except BaseException:
        with trio.CancelScope(shield=True):
            await _stop(process, supervised=True)
        raise
    if said != b"ok":
        with trio.CancelScope(shield=True):
            await _stop(process, supervised=True)
        errno = int(said) if said.isdigit() else 0
        if errno:
            raise OSError(errno, os.strerror(errno))
        raise OSError(f"the stdio supervisor did not start (it said {said[:20]!r})")
    return process


async def _read_status(fd: int) -> bytes:
    # What the supervisor says of the exec: ``ok`` or an errno (a few bytes), or
    # nothing if it died first.
    said = b""
    async with trio.lowlevel.FdStream(fd) as stream:
        while len(said) <= 20 and (chunk := await stream.receive_some(64)):
            said += chunk
    return said


def _reaper_script() -> str | None:
    # The supervisor's file, where it can run (Linux, a real interpreter, a file).
    if not sys.platform.startswith("linux") or not sys.executable:
        return None
    path = Path(__file__).with_name("_reaper.py")
    return str(path) if path.is_file() else None


async def _stop(process: trio.Process, *, supervised: bool) -> None:
    # Close stdin, then SIGTERM, then SIGKILL; reap. Bounded. A supervisor (see
    # _reaper) gets SIGTERM alone and SIGKILLs the server's whole tree GRACE seconds
    # later; else the process group gets each signal.
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        await process.stdin.aclose()
    steps = (
        ((None, GRACE), (signal.SIGTERM, 2 * GRACE), (signal.SIGKILL, GRACE))
        if supervised
        else ((None, GRACE), (signal.SIGTERM, GRACE), (signal.SIGKILL, GRACE))
    )
    for sig, grace in steps:
        if sig is not None:
            if supervised and sig == signal.SIGTERM:
                process.send_signal(sig)
            else:
                _signal_group(process, sig)
        with trio.move_on_after(grace):
            await process.wait()
            break
    # What the server started and left in its group (a helper that ignores stdin's end
    # and SIGTERM, holding the server's pipes) goes too. The group's id cannot have
    # been reused: the kernel keeps a process id while a group still goes by it.
    _signal_group(process, signal.SIGKILL)
    await process.stdout.aclose()


def _signal_group(process: trio.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)
