"""Hostile and sloppy stdio MCP servers: processes they leave behind, pipes they keep."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
import trio

from subagent import open_pool
from subagent.mcp import McpServer, McpServerError, _sessions

from .helpers import FIXTURE, PATIENCE, wait_for


def ended(pid: int) -> bool:
    """Whether process ``pid`` is gone or a zombie (its reaper, perhaps not init here,
    may not have collected it yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def with_helper(name: str, tmp_path: Path, helper: str) -> McpServer:
    """The fixture server, started by a shell that first starts ``helper`` in the
    background (as a server's helper process: same group, same pipes) and writes the
    helper's pid and its own to files."""
    script = (
        f'{helper} & echo $! > "{tmp_path}/helper.pid"; echo $$ > "{tmp_path}/server.pid"; '
        f'exec "$0" "$@"'
    )
    return McpServer(name, command="sh", args=("-c", script, sys.executable, FIXTURE))


@pytest.mark.slow
async def test_a_helper_process_the_server_leaves_is_stopped_with_it(tmp_path: Path) -> None:
    # The helper ignores SIGTERM and holds the server's stdout; the server itself exits
    # at once when its stdin closes.
    server = with_helper("fx", tmp_path, "trap '' TERM; sleep 3600")
    async with open_pool(mcp=[server]) as pool:
        assert pool.mcp is not None and pool.mcp.is_up("fx")
        helper = int((tmp_path / "helper.pid").read_text())
        assert not ended(helper)
    await wait_for(lambda: ended(helper), "the helper stopped")


@pytest.mark.slow
async def test_a_server_that_dies_while_its_helper_holds_the_pipe_is_seen_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its stdout never reaches its end (the helper holds it): the server's exit is
    # what ends the connection. No ping would notice it first.
    monkeypatch.setattr(_sessions, "PING_INTERVAL", 3600.0)
    server = with_helper("fx", tmp_path, "sleep 3600")
    async with open_pool(mcp=[server]) as pool:
        [echo] = pool.mcp_tools("fx", "echo")
        assert await echo.execute('{"text": "hi"}') == "hi"
        helper = int((tmp_path / "helper.pid").read_text())
        os.kill(int((tmp_path / "server.pid").read_text()), signal.SIGKILL)
        with trio.fail_after(PATIENCE), pytest.raises(McpServerError) as info:
            await echo.execute('{"text": "hi"}')
        assert str(info.value) == (
            "MCP server 'fx' closed the connection during the call; it will be started again"
        )
        await wait_for(lambda: pool.mcp is not None and pool.mcp.is_up("fx"), "restarted")
        assert await echo.execute('{"text": "again"}') == "again"
        assert ended(helper)  # stopped with the server that started it
