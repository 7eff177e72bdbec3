"""Tool parallelism (issue 5.3): consecutive read-only calls run concurrently, bounded."""

from __future__ import annotations

import json

import trio
import trio.testing

from agentcore import (
    Agent,
    EndReason,
    EventKind,
    GateDecision,
    GateRequest,
    Message,
    Run,
    ToolCall,
    current_run,
)
from agentcore.testing import RecordingTool, ScriptedModel
from tests.agentcore._support import Recorder

Clock = trio.testing.MockClock


def reply(*names: str) -> Message:
    return Message(
        "assistant",
        "",
        tool_calls=tuple(ToolCall(f"c{i}", n, json.dumps({"i": i})) for i, n in enumerate(names)),
    )


async def test_consecutive_read_only_calls_run_together(autojump_clock: Clock) -> None:
    read = RecordingTool("read", "r", read_only=True, delay=1)
    write = RecordingTool("write", "w", delay=1)
    model = ScriptedModel([reply("read", "read", "write", "read", "read", "read"), "done"])
    result = await Agent(model=model, tools=[read, write]).run("x")
    assert result.summary.duration == 3.0
    assert read.max_active == 3
    assert write.max_active == 1
    assert [m.tool_call_id for m in result.messages[2:8]] == [f"c{i}" for i in range(6)]
    assert [m.content for m in result.messages[2:8]] == ["r", "r", "w", "r", "r", "r"]


async def test_concurrency_is_bounded_by_max_parallel_tools(autojump_clock: Clock) -> None:
    read = RecordingTool("read", "r", read_only=True, delay=1)
    model = ScriptedModel([reply(*["read"] * 10), "done"])
    result = await Agent(model=model, tools=[read], max_parallel_tools=3).run("x")
    assert result.summary.duration == 4.0
    assert read.max_active == 3
    assert result.summary.tool_calls == 10


async def test_results_come_back_in_call_order(autojump_clock: Clock) -> None:
    async def slow_first(arguments: str) -> str:
        i = json.loads(arguments)["i"]
        await trio.sleep(3 - i)
        return f"result {i}"

    read = RecordingTool("read", slow_first, read_only=True)
    rec = Recorder()
    events = rec.events

    model = ScriptedModel([reply("read", "read", "read"), "done"])
    result = await Agent(model=model, tools=[read]).run("x", emit=rec)
    assert result.summary.duration == 3.0
    assert [m.content for m in result.messages[2:5]] == ["result 0", "result 1", "result 2"]
    starts = [e.call.id for e in events if e.kind is EventKind.tool_start and e.call]
    ends = [e.call.id for e in events if e.kind is EventKind.tool_end and e.call]
    assert starts == ["c0", "c1", "c2"]
    assert ends == ["c2", "c1", "c0"]
    assert model.requests[1].messages[2:5] == result.messages[2:5]


async def test_the_gate_sees_every_concurrent_call(autojump_clock: Clock) -> None:
    asked: list[str] = []

    async def gate(request: GateRequest) -> GateDecision:
        asked.append(request.call.id)
        await trio.sleep(1)
        return GateDecision(request.call.id != "c1", "odd one out")

    read = RecordingTool("read", read_only=True)
    model = ScriptedModel([reply("read", "read", "read"), "done"])
    result = await Agent(model=model, tools=[read], gate=gate).run("x")
    assert sorted(asked) == ["c0", "c1", "c2"]
    assert result.summary.duration == 1.0
    assert result.summary.denied == 1
    assert result.messages[3] == Message("tool", "denied: odd one out", tool_call_id="c1",
                                         is_error=True)


async def test_concurrent_tools_see_the_current_run(autojump_clock: Clock) -> None:
    seen: list[Run | None] = []

    async def look(arguments: str) -> str:
        await trio.sleep(1)
        seen.append(current_run())
        return "ok"

    read = RecordingTool("read", look, read_only=True)
    run = Agent(model=ScriptedModel([reply("read", "read"), "done"]), tools=[read]).new_run("x")
    await run.run()
    assert seen == [run, run]


async def test_an_interrupt_waits_for_the_batch_and_skips_the_rest(autojump_clock: Clock) -> None:
    read = RecordingTool("read", read_only=True, block=True)
    write = RecordingTool("write")
    model = ScriptedModel([reply("read", "read", "write"), "summary"])
    run = Agent(model=model, tools=[read, write]).new_run("x")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run)
        await trio.testing.wait_all_tasks_blocked()
        assert read.active == 2
        run.interrupt()
        read.release()
    assert write.calls == []
    assert run.summary is not None
    assert run.summary.end_reason is EndReason.interrupted
    assert [m.content for m in run.messages[2:5]] == ["ok", "ok", "skipped: interrupted"]


async def test_an_abort_cancels_the_whole_batch(autojump_clock: Clock) -> None:
    read = RecordingTool("read", read_only=True, block=True)
    model = ScriptedModel([reply(*["read"] * 4), "never"])
    run = Agent(model=model, tools=[read], max_parallel_tools=2).new_run("x")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run)
        await trio.testing.wait_all_tasks_blocked()
        assert read.active == 2
        run.abort()
    assert len(read.calls) == 2
    assert read.active == 0
    assert run.summary is not None
    assert run.summary.end_reason is EndReason.aborted
    assert run.messages == [Message("user", "x")]


async def test_an_interrupt_while_waiting_for_a_slot_skips_the_rest_of_the_batch(
    autojump_clock: Clock,
) -> None:
    read = RecordingTool("read", read_only=True, block=True)
    model = ScriptedModel([reply(*["read"] * 4), "summary"])
    run = Agent(model=model, tools=[read], max_parallel_tools=2).new_run("x")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run)
        await trio.testing.wait_all_tasks_blocked()
        run.interrupt()
        read.release()
    assert len(read.calls) == 2
    assert [m.content for m in run.messages[2:6]] == [
        "ok", "ok", "skipped: interrupted", "skipped: interrupted"
    ]
    assert [m.tool_call_id for m in run.messages[2:6]] == ["c0", "c1", "c2", "c3"]
