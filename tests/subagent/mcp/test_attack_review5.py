"""Review 5's holes in the MCP client, against a real hostile stdio server
(hostile_stdio.py, a subprocess): a listing of millions of tiny values, schemas with
NaN or Infinity, a forged "connection closed" error, and a server's stderr."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from subagent import Event, EventKind, Stream, open_pool
from subagent.mcp import McpServer, McpServerError, _sessions
from subagent.mcp._framing import MAX_VALUES
from subagent.mcp._stderr import MAX_STDERR, MAX_STDERR_SHOWN, StderrTail
from subagent.mcp._stdio import MAX_MESSAGE

from ..helpers import drain
from .helpers import wait_for
from .hostile_stdio import SECRET

HOSTILE = str(Path(__file__).with_name("hostile_stdio.py"))


def hostile(mode: str, *args: str, name: str = "h") -> McpServer:
    return McpServer(name, command=sys.executable, args=(HOSTILE, mode, *args))


async def first_start(server: McpServer) -> tuple[bool, list[str], dict[str, Any]]:
    """Whether ``server`` is up once the pool has opened, the errors reported until the
    pool closed, and the tools' schemas by name."""
    stream = Stream(100)
    async with open_pool(mcp=[server], events=stream) as pool:
        assert pool.mcp is not None
        up = pool.mcp.is_up(server.name)
        schemas = {t.name: t.parameters for t in pool.mcp_tools(server.name)}
    stream.close()
    events: list[Event] = await drain(stream)
    return up, [e.error or "" for e in events if e.kind is EventKind.mcp_server_error], schemas


async def test_a_listing_of_too_many_values_ends_the_connection_before_it_is_parsed() -> None:
    # Just under 4 MiB of "{}," once took 205.6 MB to parse (bench/mcp_listing_memory.py).
    size = MAX_MESSAGE - 200
    up, errors, _ = await first_start(hostile("values", str(size)))
    assert not up
    assert errors[0] == (
        "MCP server 'h' failed: broke a bound: "
        "a message holds more than 65536 JSON values (MAX_VALUES)"
    )


@pytest.mark.parametrize("empties", [32759, 32760])
async def test_a_listing_at_the_value_bound_is_read_and_one_past_it_is_not(empties: int) -> None:
    # The reply holds 18 values around ``empties`` empty objects (two each): exactly
    # MAX_VALUES with 32,759 of them. Read and parsed, the tool is then left out for
    # its schema's size (over 64 KiB).
    up, errors, _ = await first_start(hostile("values", str(3 * empties)))
    if 18 + 2 * empties <= MAX_VALUES:
        assert up
        assert errors == ["MCP server 'h' tool 'many' is left out: its schema is too large"]
    else:
        assert not up
        assert errors[0] == (
            "MCP server 'h' failed: broke a bound: "
            "a message holds more than 65536 JSON values (MAX_VALUES)"
        )


async def test_a_schema_with_nan_or_infinity_is_left_out_and_reported() -> None:
    # NaN and Infinity are not JSON: a model API refuses the whole request that
    # carries them, so the run would fail on its first call.
    up, errors, schemas = await first_start(hostile("nan"))
    assert up
    assert errors == [
        f"MCP server 'h' tool {name!r} is left out: its schema holds NaN or Infinity (not JSON)"
        for name in ("bad", "inf", "big")
    ]
    assert schemas == {"echo": {"type": "object"}}


async def test_many_values_inside_strings_are_one_value() -> None:
    async with open_pool(mcp=[hostile("echo")]) as pool:
        [echo] = pool.mcp_tools("h", "echo")
        with trio.fail_after(60):
            assert await echo.execute('{"text": "' + ",[" * 1_000_000 + '"}') == "ok"


async def test_a_forged_connection_closed_error_fails_the_call_and_pings_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # -32000 is the code the SDK gives a call whose connection closed; a server that
    # answers with it must not make the pool restart it (and so lose every other
    # call in flight, again and again).
    monkeypatch.setattr(_sessions, "PING_INTERVAL", 3600.0)
    pings = tmp_path / "pings"
    stream = Stream(100)
    async with open_pool(mcp=[hostile("fake-closed", str(pings))], events=stream) as pool:
        assert pool.mcp is not None
        [echo] = pool.mcp_tools("h", "echo")
        for n in (1, 2):
            with pytest.raises(McpServerError) as info:
                await echo.execute('{"text": "x"}')
            assert str(info.value) == (
                "MCP server 'h' failed the call: Connection closed; it is being pinged"
            )
            # Pinged at once (the interval is an hour), answered: still up, never restarted.
            await wait_for(lambda n=n: pings.exists() and pings.read_text() == "ping\n" * n,
                           "pinged")
            assert pool.mcp.is_up("h")
        connection = pool.mcp._connections["h"]
        assert (connection.starts, connection.failures, connection.pings) == (1, 0, 2)
    stream.close()
    assert [e for e in await drain(stream) if e.kind is EventKind.mcp_server_error] == []


async def test_a_servers_stderr_is_bounded_masked_and_shown_cut() -> None:
    # 1 MiB of noise, then a secret of its env and a host path: the report shows the
    # last 500 characters, the secret masked, the path cut to its last part.
    server = McpServer("h", command=sys.executable, args=(HOSTILE, "stderr", str(1 << 20)),
                       env={"API_KEY": SECRET})
    up, errors, _ = await first_start(server)
    assert not up
    tail = "\\nTraceback: …/srv.py: key ***"
    problem, shown = errors[0].split("; its stderr ends: ")
    assert problem == "MCP server 'h' failed: closed the connection"
    assert shown == "…" + "x" * (MAX_STDERR_SHOWN - 1 - len(tail)) + tail
    assert SECRET not in errors[0] and "someone" not in errors[0]


def test_the_stderr_tail_keeps_the_last_bytes_only() -> None:
    tail = StderrTail(McpServer("h", command="x", headers={"X-Key": SECRET}))
    assert tail.shown() == ""
    for _ in range(100):
        tail.feed(b"y" * 1000)
    tail.feed(f"at /a/b/c.py and http://h/a/b with {SECRET}".encode())
    assert repr(tail) == f"<StderrTail server='h' kept={MAX_STDERR} total={100_000 + 62}>"
    shown = tail.shown()
    assert len(shown) == MAX_STDERR_SHOWN
    assert shown.endswith("yat …/c.py and http://h/a/b with ***")
