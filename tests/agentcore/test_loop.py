"""The base run loop (SPEC 1.4): exact event sequences and summaries."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentcore import (
    Agent,
    EndReason,
    EventKind,
    GateDecision,
    GateRequest,
    Message,
    RunSummary,
    ToolCall,
    Usage,
)
from agentcore.testing import Blocked, RecordingTool, ScriptedModel, tool_call_reply
from tests.agentcore._support import Recorder

K = EventKind

# Every test runs on the autojump clock (the `clock` fixture), so durations are exact.
Clock = trio.testing.MockClock


def two_calls() -> Message:
    return Message(
        "assistant",
        "",
        tool_calls=(ToolCall("c1", "echo", '{"n": 1}'), ToolCall("c2", "echo", '{"n": 2}')),
    )


TOOL_TURN = ["turn_start", "model_request", "model_response"]
ONE_CALL = ["tool_start", "gate_decision", "tool_end"]


async def test_direct_answer(autojump_clock: Clock) -> None:
    rec = Recorder()
    model = ScriptedModel(["hello"], usage=Usage(3, 2))
    result = await Agent(model=model, system_prompt="be brief").run("hi", emit=rec)
    assert result.output == "hello"
    assert rec.kinds == ["agent_start", *TOOL_TURN, "agent_end"]
    assert rec.events[0].text == "hi"
    assert result.summary == RunSummary(
        turns=1, usage=Usage(3, 2), end_reason=EndReason.stop, duration=0.0
    )
    assert rec.events[-1].summary == result.summary
    assert result.messages == (
        Message("system", "be brief"),
        Message("user", "hi"),
        Message("assistant", "hello"),
    )
    assert model.requests[0].messages == (Message("system", "be brief"), Message("user", "hi"))
    assert result.exception is None


async def test_turn_with_two_tool_calls(autojump_clock: Clock) -> None:
    rec = Recorder()
    tool = RecordingTool("echo", lambda args: f"got {args}")
    model = ScriptedModel([two_calls(), "done"], usage=Usage(1, 1))
    result = await Agent(model=model, tools=[tool]).run("go", emit=rec)
    assert rec.kinds == [
        "agent_start", *TOOL_TURN, *ONE_CALL, *ONE_CALL, *TOOL_TURN, "agent_end"
    ]
    assert tool.calls == ['{"n": 1}', '{"n": 2}']
    assert result.messages[-3:] == (
        Message("tool", 'got {"n": 1}', tool_call_id="c1"),
        Message("tool", 'got {"n": 2}', tool_call_id="c2"),
        Message("assistant", "done"),
    )
    assert [e.turn for e in rec.events] == [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2]
    ends = [e for e in rec.events if e.kind is K.tool_end]
    assert [(e.call.id if e.call else None, e.text, e.is_error) for e in ends] == [
        ("c1", 'got {"n": 1}', False),
        ("c2", 'got {"n": 2}', False),
    ]
    assert result.summary == RunSummary(
        turns=2, tool_calls=2, usage=Usage(2, 2), end_reason=EndReason.stop, duration=0.0
    )


async def test_denied_call_does_not_run(autojump_clock: Clock) -> None:
    rec = Recorder()
    tool = RecordingTool("echo")
    seen: list[GateRequest] = []

    async def gate(request: GateRequest) -> GateDecision:
        seen.append(request)
        return GateDecision(False, "not today")

    model = ScriptedModel([tool_call_reply("echo", "{}", id="c1"), "ok"])
    result = await Agent(model=model, tools=[tool], gate=gate).run(
        "go", emit=rec, path=("root/0001",)
    )
    assert tool.calls == []
    assert seen == [GateRequest(("root/0001",), tool, ToolCall("c1", "echo", "{}"))]
    assert rec.kinds == ["agent_start", *TOOL_TURN, *ONE_CALL, *TOOL_TURN, "agent_end"]
    decision = rec.events[5]
    assert decision.decision == GateDecision(False, "not today")
    assert result.messages[-2] == Message(
        "tool", "denied: not today", tool_call_id="c1", is_error=True
    )
    assert (result.summary.denied, result.summary.tool_errors) == (1, 0)


async def test_gate_that_raises_or_hangs_denies(autojump_clock: Clock) -> None:
    async def broken(request: GateRequest) -> GateDecision:
        raise RuntimeError("gate down")

    async def hanging(request: GateRequest) -> GateDecision:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    tool = RecordingTool("echo")
    for gate, text in [
        (broken, "denied: the gate failed: RuntimeError: gate down"),
        (hanging, "denied: the gate did not decide within 7s"),
    ]:
        model = ScriptedModel([tool_call_reply("echo", "{}", id="c1"), "ok"])
        start = trio.current_time()
        result = await Agent(model=model, tools=[tool], gate=gate, gate_timeout=7).run("go")
        assert result.messages[-2] == Message("tool", text, tool_call_id="c1", is_error=True)
        assert result.summary.denied == 1
        assert result.summary.duration == (7.0 if gate is hanging else 0.0)
        assert trio.current_time() - start == result.summary.duration
    assert tool.calls == []


async def test_tool_that_raises_gives_error_result(autojump_clock: Clock) -> None:
    rec = Recorder()
    tool = RecordingTool("echo", ValueError("bad input"))
    model = ScriptedModel([tool_call_reply("echo", "{}", id="c1"), "recovered"])
    result = await Agent(model=model, tools=[tool]).run("go", emit=rec)
    assert result.output == "recovered"
    assert rec.kinds == ["agent_start", *TOOL_TURN, *ONE_CALL, *TOOL_TURN, "agent_end"]
    text = "tool 'echo' failed: ValueError: bad input"
    assert rec.events[6].text == text and rec.events[6].is_error
    assert model.requests[1].messages[-1] == Message(
        "tool", text, tool_call_id="c1", is_error=True
    )
    assert result.summary == RunSummary(
        turns=2, tool_calls=1, tool_errors=1, end_reason=EndReason.stop, duration=0.0
    )


async def test_invalid_json_arguments(autojump_clock: Clock) -> None:
    rec = Recorder()
    tool = RecordingTool("echo")
    model = ScriptedModel(
        [tool_call_reply("echo", "{oops", id="c1"), tool_call_reply("echo", "[1]", id="c2"), "ok"]
    )
    result = await Agent(model=model, tools=[tool]).run("go", emit=rec)
    assert tool.calls == []
    no_gate = ["tool_start", "tool_end"]
    assert rec.kinds == [
        "agent_start", *TOOL_TURN, *no_gate, *TOOL_TURN, *no_gate, *TOOL_TURN, "agent_end"
    ]
    assert [m.content for m in result.messages if m.role == "tool"] == [
        "invalid JSON arguments for tool 'echo': "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        "arguments for tool 'echo' must be a JSON object, not list",
    ]
    assert result.summary.tool_errors == 2


async def test_unknown_tool(autojump_clock: Clock) -> None:
    tool = RecordingTool("echo")
    model = ScriptedModel([tool_call_reply("nope", "{}", id="c1"), "ok"])
    result = await Agent(model=model, tools=[tool]).run("go")
    assert result.messages[-2] == Message(
        "tool", "unknown tool 'nope'; available tools: echo", tool_call_id="c1", is_error=True
    )


async def test_max_turns(autojump_clock: Clock) -> None:
    rec = Recorder()
    tool = RecordingTool("echo")
    model = ScriptedModel(lambda request: tool_call_reply("echo", "{}", content="thinking"))
    result = await Agent(model=model, tools=[tool], max_turns=3).run("go", emit=rec)
    assert rec.kinds == ["agent_start", *([*TOOL_TURN, *ONE_CALL] * 3), "agent_end"]
    assert result.output == "thinking"
    assert result.summary == RunSummary(
        turns=3, tool_calls=3, end_reason=EndReason.max_turns, duration=0.0
    )


async def test_model_error_ends_run_with_error(autojump_clock: Clock) -> None:
    rec = Recorder()
    boom = ConnectionError("model unreachable")
    result = await Agent(model=ScriptedModel([boom])).run("go", emit=rec)
    assert rec.kinds == ["agent_start", "turn_start", "model_request", "error", "agent_end"]
    assert rec.events[3].text == "ConnectionError: model unreachable"
    assert result.exception is boom
    assert result.output == ""
    assert result.summary == RunSummary(
        turns=1,
        end_reason=EndReason.error,
        error="ConnectionError: model unreachable",
        duration=0.0,
    )


async def test_cancel_mid_tool_still_ends_the_run(autojump_clock: Clock) -> None:
    rec = Recorder()
    tool = RecordingTool("echo", block=True)
    model = ScriptedModel([tool_call_reply("echo", "{}", id="c1"), "never"])
    agent = Agent(model=model, tools=[tool])
    run = agent.new_run("go", emit=rec)
    async with trio.open_nursery() as nursery:

        async def runner() -> None:
            await run.run()
            raise AssertionError("a cancelled run must not return")

        nursery.start_soon(runner)
        await trio.sleep(4)
        assert tool.active == 1
        nursery.cancel_scope.cancel()
    assert rec.kinds == ["agent_start", *TOOL_TURN, "tool_start", "gate_decision", "agent_end"]
    assert run.summary == RunSummary(
        turns=1, tool_calls=1, end_reason=EndReason.aborted, duration=4.0
    )
    assert rec.events[-1].summary == run.summary


async def test_cancel_while_blocked_in_model(autojump_clock: Clock) -> None:
    rec = Recorder()
    model = ScriptedModel([Blocked("late")])
    with trio.move_on_after(2):
        await Agent(model=model).run("go", emit=rec)
    assert rec.kinds == ["agent_start", "turn_start", "model_request", "agent_end"]
    summary = rec.events[-1].summary
    assert summary is not None and summary.end_reason is EndReason.aborted
    assert summary.duration == 2.0
    assert model.blocked == 0


async def test_opaque_tool_timeout(autojump_clock: Clock) -> None:
    tool = RecordingTool("slow", block=True)
    model = ScriptedModel([tool_call_reply("slow", "{}", id="c1"), "went on"])
    result = await Agent(model=model, tools=[tool], tool_timeout=30).run("go")
    assert result.output == "went on"
    assert result.messages[-2] == Message(
        "tool", "tool 'slow' timed out after 30s", tool_call_id="c1", is_error=True
    )
    assert result.summary.duration == 30.0
    assert result.summary.tool_errors == 1


async def test_streaming_model_emits_deltas(autojump_clock: Clock) -> None:
    from agentcore.testing import StreamingScriptedModel

    rec = Recorder()
    model = StreamingScriptedModel(["hello world"], chunk=4)
    result = await Agent(model=model).run("hi", emit=rec)
    assert result.output == "hello world"
    assert rec.kinds == [
        "agent_start", "turn_start", "model_request",
        "model_delta", "model_delta", "model_delta", "model_response", "agent_end",
    ]
    assert [e.text for e in rec.events if e.kind is K.model_delta] == ["hell", "o wo", "rld"]


async def test_keyboard_interrupt_is_not_swallowed(autojump_clock: Clock) -> None:
    tool = RecordingTool("echo", KeyboardInterrupt())
    model = ScriptedModel([tool_call_reply("echo", "{}"), "no"])
    rec = Recorder()
    with pytest.raises(KeyboardInterrupt):
        await Agent(model=model, tools=[tool]).run("go", emit=rec)
    assert rec.kinds[-1] == "agent_end"
