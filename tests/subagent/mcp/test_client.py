"""MCP servers as tool sources, against real servers: mcp-server-time and mcp-server-git
(from the package index) over stdio, the fixture server over streamable HTTP."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from agentcore import Agent, GateDecision, Message, ModelRequest, ModelResponse
from agentcore import EventKind as CoreKind
from agentcore.testing import ScriptedModel, tool_call_reply
from ledger import MemorySink
from subagent import Event, EventKind, Spec, Stream, SubagentTool, open_pool
from subagent.mcp import McpServer

from ..helpers import drain
from .helpers import (
    FIXTURE,
    delegate_reply,
    gone,
    http_fixture_server,
    read_or_delegate,
    time_server,
    wait_for,
    with_pidfile,
)

# The SDK's streamable HTTP client leaves httpx2's and httpcore2's response iterators to
# the garbage collector when a stream ends; trio warns about each (fatal here, with
# filterwarnings=error). Only for the test of that transport.
sse_leak = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(x|core)2\.:ResourceWarning",
    r"ignore:Exception ignored in. <async_generator object "
    ":pytest.PytestUnraisableExceptionWarning",
)

CONVERT = '{"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}'


def tool_texts(model: ScriptedModel, request: int) -> list[str]:
    return [m.content for m in model.requests[request].messages if m.role == "tool"]


async def delegate_to_clock(
    read_only: tuple[str, ...],
) -> tuple[ScriptedModel, list[Event], MemorySink]:
    # A lead with a read-only gate delegates to a child whose spec names one MCP tool.
    stream = Stream(1000)
    sink = MemorySink()
    clock = ScriptedModel([tool_call_reply("convert_time", CONVERT, id="t1"), "it is 21:00"])
    lead = ScriptedModel([delegate_reply("clock", "what time in Tokyo?", id="d1"), "lead done"])
    async with open_pool(events=stream, mcp=[time_server(read_only=read_only)]) as pool:
        pool.register(Spec("clock", model=clock, tools=pool.mcp_tools("time", "convert_time"),
                           audit=sink))
        pool.register(Spec("lead", model=lead, tools=[SubagentTool(pool)], gate=read_or_delegate,
                           audit=sink))
        result = await (await pool.submit("lead", "go")).wait()
    stream.close()
    assert result.output == "lead done"
    return clock, await drain(stream), sink


@pytest.mark.slow
async def test_a_delegated_child_calls_an_mcp_tool_gated_and_audited_at_its_path() -> None:
    clock, events, sink = await delegate_to_clock(read_only=("convert_time",))
    child = ("lead/0001", "clock/0002")
    [answer] = tool_texts(clock, 1)
    converted = json.loads(answer)
    assert converted["target"]["datetime"].endswith("T21:00:00+09:00")
    assert converted["time_difference"] == "+9.0h"
    decisions = [e for e in events if e.kind is CoreKind.gate_decision]
    assert [(e.path, e.event.decision) for e in decisions if e.event] == [
        (("lead/0001",), GateDecision(True, "delegation")),
        (child, GateDecision(True, "read-only tool"))]
    entries = [(e.kind, e.path, e.tool) for e in sink.entries if e.kind in (
        "tool_request", "gate_decision", "tool_result") and e.tool == "convert_time"]
    assert entries == [("tool_request", child, "convert_time"),
                       ("gate_decision", child, "convert_time"),
                       ("tool_result", child, "convert_time")]
    result = next(e for e in sink.entries if e.kind == "tool_result" and e.path == child)
    assert result.result == answer


@pytest.mark.slow
async def test_read_only_comes_from_the_config_not_the_servers_hints() -> None:
    # mcp-server-time marks convert_time readOnlyHint=true: ignored, so the
    # parent's read-only gate denies the call.
    clock, _, _ = await delegate_to_clock(read_only=())
    [answer] = tool_texts(clock, 1)
    assert answer.startswith("denied: the gate of lead/0001: ")


@pytest.mark.slow
async def test_a_killed_server_gives_error_results_the_run_answers_and_it_restarts(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    await trio.run_process(["git", "init", "-q", str(repo)])
    pidfile = tmp_path / "git.pid"
    server = with_pidfile("git", pidfile, [sys.executable, "-m", "mcp_server_git",
                                           "--repository", str(repo)], read_only=("git_status",))
    status = json.dumps({"repo_path": str(repo)})
    killed: list[int] = []

    class KillingModel:
        # Calls git_status; before its second call's reply, SIGKILLs the server.
        def __init__(self) -> None:
            self.requests: list[ModelRequest] = []

        async def complete(self, request: ModelRequest) -> ModelResponse:
            self.requests.append(request)
            await trio.lowlevel.checkpoint()
            turn = len(self.requests)
            if turn == 2:
                pid = int(pidfile.read_text())
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                await wait_for(lambda: gone(pid), "the killed server reaped")
            if turn <= 2:
                return ModelResponse(tool_call_reply("git_status", status, id=f"s{turn}"))
            return ModelResponse(Message("assistant", "answered anyway"))

    model = KillingModel()
    stream = Stream(1000)
    async with open_pool(events=stream, mcp=[server]) as pool:
        pool.register(Spec("git", model=model, tools=pool.mcp_tools("git")))
        result = await (await pool.submit("git", "status?")).wait()
        assert result.output == "answered anyway"
        first, second = (
            [m for m in model.requests[turn].messages if m.role == "tool"][-1]
            for turn in (1, 2)
        )
        assert not first.is_error and "On branch" in first.content
        assert second.is_error
        assert second.content.startswith(
            "tool 'git_status' failed: McpServerError: MCP server 'git' ")
        # It is started again (after a 1s backoff), and its tools work again.
        assert pool.mcp is not None
        await wait_for(lambda: pool.mcp is not None and pool.mcp.is_up("git"), "restarted")
        again = await pool.mcp_tools("git", "git_status")[0].execute(status)
        assert "On branch" in again
        restarted = int(pidfile.read_text())
    stream.close()
    events = [e for e in await drain(stream) if e.kind is EventKind.mcp_server_error]
    assert [e.path for e in events] == [()]
    assert events[0].error is not None and events[0].error.startswith("MCP server 'git' ")
    assert restarted != killed[0]
    assert gone(restarted)  # closed with the pool, and reaped


@pytest.mark.slow
async def test_a_server_that_never_starts_does_not_block_the_pool(tmp_path: Path) -> None:
    pidfile = tmp_path / "stuck.pid"
    stuck = with_pidfile("stuck", pidfile, ["sleep", "3600"], start_timeout=2.0)
    stream = Stream(1000)
    async with open_pool(events=stream, mcp=[stuck, time_server()]) as pool:
        assert pool.mcp is not None
        assert (pool.mcp.is_up("stuck"), pool.mcp.is_up("time")) == (False, True)
        assert pool.mcp_tools("stuck") == ()
        [placeholder] = pool.mcp_tools("stuck", "anything")
        with pytest.raises(Exception) as info:
            await placeholder.execute("{}")
        assert str(info.value) == (
            "MCP server 'stuck' is not available: did not start within 2s")
        assert {t.name for t in pool.mcp_tools("time")} == {"get_current_time", "convert_time"}
        pid = int(pidfile.read_text())
    stream.close()
    errors = [e.error for e in await drain(stream) if e.kind is EventKind.mcp_server_error]
    assert errors[0] == "MCP server 'stuck' did not start within 2s"
    assert gone(pid)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    yield from http_fixture_server()


@pytest.mark.slow
@sse_leak
async def test_streamable_http_server_answers_fails_cuts_and_cancels(
    http_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    server = McpServer("fx", url=http_url)
    calls = [
        tool_call_reply("echo", '{"text": "hello"}', id="e1"),
        tool_call_reply("fail", '{"reason": "boom"}', id="f1"),
        tool_call_reply("big", json.dumps({"size": 2 * 1024 * 1024}), id="b1"),
    ]
    model = ScriptedModel([*calls, "done"])
    waiter = ScriptedModel([tool_call_reply("wait", json.dumps({"marker": str(marker)}), id="w1"),
                            "never"])
    async with open_pool(mcp=[server]) as pool:
        pool.register(Spec("fx", model=model, tools=pool.mcp_tools("fx")))
        pool.register(Spec("waiter", model=waiter, tools=pool.mcp_tools("fx", "wait")))
        assert (await (await pool.submit("fx", "go")).wait()).output == "done"
        echo, fail, big = (tool_texts(model, turn)[-1] for turn in (1, 2, 3))
        assert echo == "hello"
        assert fail == (
            "tool 'fail' failed: McpToolError: MCP server 'fx': Error executing tool fail: boom")
        # The SDK's HTTP transport takes at most 1 MiB per event: that call fails (the
        # SDK answers it "connection closed", -32000), and the server is pinged at
        # once; it answers, so it is not started again.
        assert big == (
            "tool 'big' failed: McpServerError: MCP server 'fx' failed the call: SSE stream "
            "failed: Server-sent event exceeded the 1048576 byte limit.; it is being pinged")
        assert pool.mcp is not None
        connection = pool.mcp._connections["fx"]
        await wait_for(lambda: connection.pings >= 1, "pinged")
        assert pool.mcp.is_up("fx") and connection.starts == 1
        # Cancelling the run cancels its call on the server.
        task = await pool.submit("waiter", "wait")
        await wait_for(lambda: marker.exists() and marker.read_text() == "started", "started")
        task.cancel()
        await wait_for(lambda: marker.read_text() == "cancelled", "the server saw the cancel")


@pytest.mark.slow
@sse_leak
async def test_tool_timeout_bounds_an_mcp_call_and_cancels_it_on_the_server(
    http_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    call = tool_call_reply("wait", json.dumps({"marker": str(marker)}), id="w1")
    model = ScriptedModel([call, "gave up"])
    async with open_pool(mcp=[McpServer("fx", url=http_url)]) as pool:
        agent = Agent(model=model, tools=pool.mcp_tools("fx", "wait"), tool_timeout=5.0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "wait")
            await wait_for(lambda: marker.exists() and marker.read_text() == "started", "started")
        # The run has ended: its call timed out, and the server saw it cancelled.
        await wait_for(lambda: marker.read_text() == "cancelled", "the server saw the cancel")
    assert tool_texts(model, 1) == ["tool 'wait' timed out after 5s"]


@pytest.mark.slow
def test_subagent_run_starts_the_specs_files_servers(tmp_path: Path) -> None:
    import io

    from subagent._cli._cli import main

    (tmp_path / "specs.toml").write_text(f"""
[mcp.time]
command = {json.dumps(sys.executable)}
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
read_only = ["convert_time"]

[agents.clock]
model = "scripted:clock.json"
tools = ["mcp:time/convert_time"]
""")
    call = {"id": "t1", "name": "convert_time", "arguments": CONVERT}
    (tmp_path / "clock.json").write_text(json.dumps([{"tool_calls": [call]}, {"content": "ok"}]))
    out = io.StringIO()
    ledger_path = tmp_path / "ledger.jsonl"
    code = main(["run", str(tmp_path / "specs.toml"), "--agent", "clock", "what time?",
                 "--plain", "--ledger", str(ledger_path)], out=out)
    assert code == 0, out.getvalue()
    assert "\noutput:\nok\n" in out.getvalue()
    results = [json.loads(line) for line in ledger_path.read_text().splitlines()]
    [entry] = [r for r in results if r["kind"] == "tool_result"]
    assert json.loads(entry["result"])["time_difference"] == "+9.0h"


@pytest.mark.slow
async def test_a_stdio_message_past_the_bound_ends_the_connection_not_the_run(
    tmp_path: Path,
) -> None:
    from subagent.mcp._stdio import MAX_MESSAGE

    pidfile = tmp_path / "fx.pid"
    server = with_pidfile("fx", pidfile, [sys.executable, FIXTURE])
    calls = [tool_call_reply("big", json.dumps({"size": MAX_MESSAGE + 1}), id="b1"),
             tool_call_reply("big", json.dumps({"size": 3}), id="b2")]
    model = ScriptedModel([*calls, "done"])
    async with open_pool(mcp=[server]) as pool:
        first = int(pidfile.read_text())
        pool.register(Spec("fx", model=model, tools=pool.mcp_tools("fx", "big")))
        assert (await (await pool.submit("fx", "go")).wait()).output == "done"
        assert tool_texts(model, 1) == [
            "tool 'big' failed: McpServerError: MCP server 'fx' closed the connection "
            "during the call; it will be started again"]
        # Right after, the server is not up yet (a 1s backoff): an error result too.
        assert tool_texts(model, 2)[-1].startswith(
            "tool 'big' failed: McpServerError: MCP server 'fx' ")
        await wait_for(lambda: pool.mcp is not None and pool.mcp.is_up("fx"), "restarted")
        assert await pool.mcp_tools("fx", "big")[0].execute('{"size": 3}') == "xxx"
        second = int(pidfile.read_text())
    assert first != second
    assert gone(first) and gone(second)
