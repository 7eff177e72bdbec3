"""Hostile and sloppy stdio MCP servers: processes they leave behind, pipes they keep."""

from __future__ import annotations

import contextlib
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


ESCAPING = str(Path(__file__).with_name("escaping_server.py"))
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="descendants that leave the process group are stopped on Linux only",
)


def escaped(pidfile: Path) -> list[int]:
    """The pids ``escaping_server.py`` wrote, each checked to lead its own session."""
    pids = [int(line) for line in pidfile.read_text().split()]
    assert len(pids) == 2
    for pid in pids:
        assert not ended(pid)
        assert os.getsid(pid) == pid  # out of the server's session and process group
    return pids


def parent(pid: int) -> int:
    """The pid of process ``pid``'s parent."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def kill_left(pids: list[int], pidfile: Path) -> None:
    # What a failing test left running (a restarted server's pair too).
    if pidfile.exists():
        pids = pids + [int(line) for line in pidfile.read_text().split()]
    for pid in pids:
        if not ended(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@linux_only
@pytest.mark.slow
async def test_descendants_that_left_the_group_are_stopped_with_the_pool(
    tmp_path: Path,
) -> None:
    # One called setsid(); one was double-forked, its parent gone. Neither is in the
    # server's process group, which the stop signals.
    pidfile = tmp_path / "escaped.pid"
    server = McpServer("fx", command=sys.executable, args=(ESCAPING, str(pidfile)))
    pids: list[int] = []
    try:
        async with open_pool(mcp=[server]) as pool:
            assert pool.mcp is not None and pool.mcp.is_up("fx")
            pids = escaped(pidfile)
        await wait_for(lambda: all(ended(pid) for pid in pids), "the descendants stopped")
    finally:
        kill_left(pids, pidfile)


@linux_only
@pytest.mark.slow
async def test_descendants_that_left_the_group_are_stopped_when_the_server_dies(
    tmp_path: Path,
) -> None:
    # The server is killed; the restarted one starts its own pair.
    pidfile = tmp_path / "escaped.pid"
    server = McpServer("fx", command=sys.executable, args=(ESCAPING, str(pidfile)))
    pids: list[int] = []
    try:
        async with open_pool(mcp=[server]) as pool:
            assert pool.mcp is not None and pool.mcp.is_up("fx")
            pids = escaped(pidfile)
            [echo] = pool.mcp_tools("fx", "echo")
            server_pid = parent(pids[0])
            pidfile.unlink()
            os.kill(server_pid, signal.SIGKILL)
            await wait_for(lambda: all(ended(pid) for pid in pids), "the descendants stopped")

            def restarted() -> bool:
                assert pool.mcp is not None
                return pidfile.exists() and len(pidfile.read_text().split()) == 2 and (
                    pool.mcp.is_up("fx")
                )

            await wait_for(restarted, "restarted")
            assert await echo.execute('{"text": "again"}') == "again"
            pids += escaped(pidfile)
        await wait_for(lambda: all(ended(pid) for pid in pids), "the new ones stopped")
    finally:
        kill_left(pids, pidfile)


POOL_SCRIPT = """
import sys, trio
from pathlib import Path
from subagent import open_pool
from subagent.mcp import McpServer

async def main():
    server = McpServer("fx", command=sys.executable, args=(sys.argv[1], sys.argv[2]))
    async with open_pool(mcp=[server]) as pool:
        assert pool.mcp.is_up("fx")
        Path(sys.argv[3]).write_text("up")
        await trio.sleep_forever()

trio.run(main)
"""


@linux_only
@pytest.mark.slow
async def test_descendants_that_left_the_group_are_stopped_when_the_pool_is_killed(
    tmp_path: Path,
) -> None:
    # SIGKILL: the pool's process gets no say. The server (stdin at its end) exits;
    # what it started must not outlive it.
    pidfile, up = tmp_path / "escaped.pid", tmp_path / "up"
    pool = await trio.lowlevel.open_process(
        [sys.executable, "-c", POOL_SCRIPT, ESCAPING, str(pidfile), str(up)],
        env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    pids: list[int] = []
    try:
        await wait_for(lambda: up.exists() or pool.poll() is not None, "the pool is up")
        assert pool.returncode is None
        pids = escaped(pidfile)
        pool.kill()
        await pool.wait()
        await wait_for(lambda: all(ended(pid) for pid in pids), "the descendants stopped")
    finally:
        pool.kill()
        kill_left(pids, pidfile)


@pytest.mark.slow
async def test_a_command_that_cannot_run_is_reported_as_it_failed(tmp_path: Path) -> None:
    # Run through the supervisor on Linux: the exec's error still comes back as such.
    (tmp_path / "plain").write_text("not a program")
    missing = McpServer("missing", command=str(tmp_path / "no-such-command"))
    plain = McpServer("plain", command=str(tmp_path / "plain"))
    async with open_pool(mcp=[missing, plain]) as pool:
        assert pool.mcp is not None
        for name, why in (
            ("missing", "failed to start: its command was not found"),
            ("plain", "failed to start: Permission denied"),
        ):
            [placeholder] = pool.mcp_tools(name, "anything")
            with pytest.raises(McpServerError) as info:
                await placeholder.execute("{}")
            assert str(info.value) == f"MCP server '{name}' is not available: {why}"
