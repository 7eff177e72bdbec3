"""Servers and helpers for the MCP tests: real servers, real processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import trio

from agentcore import GateDecision, GateRequest, Message, read_only
from agentcore.testing import tool_call_reply
from subagent.mcp import McpServer

FIXTURE = str(Path(__file__).with_name("fixture_server.py"))
#: Real subprocesses on a loaded 2-core machine: generous, never asserted.
PATIENCE = 60.0


def time_server(*, read_only: tuple[str, ...] = ()) -> McpServer:
    """mcp-server-time (from the package index), over stdio."""
    args = ("-m", "mcp_server_time", "--local-timezone", "UTC")
    return McpServer("time", command=sys.executable, args=args, read_only=read_only)


def with_pidfile(
    name: str,
    pidfile: Path,
    argv: list[str],
    *,
    read_only: tuple[str, ...] = (),
    start_timeout: float = 30.0,
) -> McpServer:
    """A stdio server whose process id is written to ``pidfile`` (the shell execs it)."""
    script = f'echo $$ > "{pidfile}"; exec "$0" "$@"'
    return McpServer(name, command="sh", args=("-c", script, *argv), read_only=read_only,
                     start_timeout=start_timeout)


def delegate_reply(agent: str, task: str, id: str) -> Message:
    return tool_call_reply("subagent", json.dumps({"agent": agent, "task": task}), id=id)


async def read_or_delegate(request: GateRequest) -> GateDecision:
    """A read-only parent's gate: read-only tools and delegation."""
    if request.tool.name == "subagent":
        await trio.lowlevel.checkpoint()
        return GateDecision(True, "delegation")
    return await read_only(request)


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended and been reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def wait_for(predicate: object, what: str) -> None:
    """Poll an outside process's state (a file, a pid) until ``predicate()`` holds."""
    assert callable(predicate)
    with trio.fail_after(PATIENCE):
        # Another process's state: nothing in this one can wake us when it changes.
        while not predicate():  # noqa: ASYNC110
            await trio.sleep(0.02)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def spawn_http_fixture(port: int) -> trio.Process:
    """Start the fixture server over streamable HTTP on 127.0.0.1:``port``; return its
    process once it accepts connections. The caller kills and reaps it."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, FIXTURE, "--http", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )

    def accepts() -> bool:
        if proc.poll() is not None:
            raise RuntimeError("the fixture HTTP server did not start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    try:
        await wait_for(accepts, "the fixture HTTP server accepts")
    except BaseException:
        proc.kill()
        with trio.CancelScope(shield=True):
            await proc.wait()
        raise
    return proc


def http_fixture_server() -> Iterator[str]:
    """Run the fixture server over streamable HTTP on 127.0.0.1; yield its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, FIXTURE, "--http", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + PATIENCE
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the fixture HTTP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()
