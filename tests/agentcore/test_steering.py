"""The run handle (issue 5.2): steer, follow_up, interrupt (graceful) and abort (hard)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from agentcore import (
    Agent,
    EndReason,
    EventKind,
    Message,
    Run,
    RunEndedError,
    RunResult,
    ToolCall,
    Usage,
)
from agentcore._steering import INTERRUPT_NOTE
from agentcore.testing import Blocked, RecordingTool, ScriptedModel, ScriptItem
from tests.agentcore._support import Recorder

Clock = trio.testing.MockClock


def calls(*ids: str) -> Message:
    return Message("assistant", "", tool_calls=tuple(ToolCall(i, "echo") for i in ids))


def tool_msg(call_id: str, text: str = "ok", is_error: bool = False) -> Message:
    return Message("tool", text, tool_call_id=call_id, is_error=is_error)


async def drive(
    run: Run, poke: Callable[[], Awaitable[None]]
) -> RunResult:
    """Start ``run``, wait until everything blocks, call ``poke``, return the result."""
    results: list[RunResult] = []

    async def go() -> None:
        results.append(await run.run())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(go)
        await trio.testing.wait_all_tasks_blocked()
        await poke()
    return results[0]


def setup(script: list[ScriptItem], *, block_tool: bool = True, **kw: object) -> tuple[
    Run, RecordingTool, Recorder
]:
    rec = Recorder()
    tool = RecordingTool("echo", block=block_tool)
    agent = Agent(model=ScriptedModel(script, usage=Usage(1, 1)), tools=[tool], **kw)  # type: ignore[arg-type]
    return agent.new_run("go", emit=rec), tool, rec


# -- graceful interrupt ----------------------------------------------------------------


async def test_interrupt_skips_the_remaining_calls_and_summarises(autojump_clock: Clock) -> None:
    run, tool, rec = setup([calls("a", "b", "c"), "summary"])

    async def poke() -> None:
        run.interrupt()
        run.interrupt()  # idempotent
        tool.release()

    result = await drive(run, poke)
    assert rec.kinds == [
        "agent_start", "turn_start", "model_request", "model_response",
        "tool_start", "gate_decision", "tool_end",
        "interrupt_received", "tool_skipped", "tool_skipped",
        "turn_start", "model_request", "model_response", "agent_end",
    ]
    assert [e.text for e in rec.events if e.kind is EventKind.tool_skipped] == [
        "skipped: interrupted", "skipped: interrupted"
    ]
    assert result.output == "summary"
    assert result.summary.end_reason is EndReason.interrupted
    assert result.summary.turns == 2
    assert result.summary.tool_calls == 3
    assert result.summary.tool_errors == 0
    assert result.messages == (
        Message("user", "go"),
        calls("a", "b", "c"),
        tool_msg("a"),
        tool_msg("b", "skipped: interrupted", True),
        tool_msg("c", "skipped: interrupted", True),
        Message("user", INTERRUPT_NOTE),
        Message("assistant", "summary"),
    )
    model = run.agent.model
    assert isinstance(model, ScriptedModel)
    assert model.requests[1].tools == ()
    assert tool.calls == ["{}"]


async def test_interrupt_before_start_makes_one_call_without_tools(autojump_clock: Clock) -> None:
    run, _tool, rec = setup(["summary"])
    run.interrupt()
    result = await run.run()
    assert result.summary.end_reason is EndReason.interrupted
    assert result.output == "summary"
    assert rec.kinds == ["agent_start", "interrupt_received", "turn_start", "model_request",
                         "model_response", "agent_end"]
    assert result.messages[-2:] == (
        Message("user", INTERRUPT_NOTE), Message("assistant", "summary")
    )


async def test_interrupt_during_a_final_answer_keeps_it(autojump_clock: Clock) -> None:
    run, _tool, rec = setup([Blocked("the answer")])
    model = run.agent.model
    assert isinstance(model, ScriptedModel)

    async def poke() -> None:
        run.interrupt()
        model.release()

    result = await drive(run, poke)
    assert result.output == "the answer"
    assert result.summary.end_reason is EndReason.interrupted
    assert result.summary.turns == 1
    assert rec.kinds[-2:] == ["interrupt_received", "agent_end"]


async def test_interrupt_on_the_last_turn_still_summarises(autojump_clock: Clock) -> None:
    run, tool, _rec = setup([calls("a"), "summary"], max_turns=1)

    async def poke() -> None:
        run.interrupt()
        tool.release()

    result = await drive(run, poke)
    assert result.output == "summary"
    assert result.summary.turns == 2
    assert result.summary.end_reason is EndReason.interrupted


async def test_tool_calls_in_the_summary_are_skipped(autojump_clock: Clock) -> None:
    run, tool, _rec = setup([calls("x")])
    run.interrupt()
    result = await run.run()
    assert result.messages[-1] == tool_msg("x", "skipped: interrupted", True)
    assert tool.calls == []
    assert result.summary.end_reason is EndReason.interrupted


# -- hard abort --------------------------------------------------------------------------


async def test_abort_cancels_the_tool_and_rolls_back_the_turn(autojump_clock: Clock) -> None:
    run, tool, rec = setup([calls("a"), calls("b", "c"), "never"])
    seen = 0

    async def poke() -> None:
        nonlocal seen
        tool.release()  # a finishes; turn 2 blocks in b
        await trio.testing.wait_all_tasks_blocked()
        seen = tool.active
        run.abort("user pressed stop")

    result = await drive(run, poke)
    assert seen == 1
    assert tool.calls == ["{}", "{}"]
    assert result.summary.end_reason is EndReason.aborted
    assert result.summary.turns == 2
    assert result.summary.tool_calls == 2
    assert result.summary.usage == Usage(2, 2)
    assert result.output == ""
    assert result.exception is None
    assert result.messages == (Message("user", "go"), calls("a"), tool_msg("a"))
    assert run.messages == list(result.messages)
    assert rec.kinds[-2:] == ["interrupt_received", "agent_end"]
    assert rec.events[-2].text == "abort: user pressed stop"


async def test_abort_cancels_the_model_call(autojump_clock: Clock) -> None:
    run, _tool, rec = setup([Blocked("late")])
    model = run.agent.model
    assert isinstance(model, ScriptedModel)

    async def poke() -> None:
        assert model.blocked == 1
        await trio.sleep(3)
        run.abort()

    result = await drive(run, poke)
    assert model.blocked == 0
    assert result.summary.end_reason is EndReason.aborted
    assert result.summary.duration == 3.0
    assert rec.events[-2].text == "abort"


async def test_abort_before_start(autojump_clock: Clock) -> None:
    run, _tool, rec = setup(["never"])
    run.abort()
    result = await run.run()
    assert result.summary.end_reason is EndReason.aborted
    assert result.summary.turns == 0
    assert rec.kinds == ["agent_start", "interrupt_received", "agent_end"]


async def test_after_the_end_interrupt_and_abort_do_nothing_and_messages_raise(
    autojump_clock: Clock,
) -> None:
    run, _tool, _rec = setup(["done"])
    result = await run.run()
    run.interrupt()
    run.abort()
    with pytest.raises(RunEndedError, match=r"^cannot steer: run run-\d+ has ended; start a new"):
        run.steer("more")
    with pytest.raises(RunEndedError, match=r"^cannot follow_up: run run-\d+ has ended"):
        run.follow_up("more")
    assert result.summary.end_reason is EndReason.stop
    with pytest.raises(RuntimeError, match="already started"):
        await run.run()


async def test_outside_cancellation_still_propagates(autojump_clock: Clock) -> None:
    run, _tool, rec = setup([calls("a")])
    with trio.move_on_after(7) as scope:
        await run.run()
    assert scope.cancelled_caught
    assert run.summary is not None
    assert run.summary.end_reason is EndReason.aborted
    assert rec.kinds[-1] == "agent_end"
    assert "interrupt_received" not in rec.kinds


# -- steering and follow-ups --------------------------------------------------------------


async def test_steering_skips_the_rest_of_the_turn_and_is_read_next(autojump_clock: Clock) -> None:
    run, tool, rec = setup([calls("a", "b"), "done"])

    async def poke() -> None:
        run.steer("use the other file")
        tool.release()

    result = await drive(run, poke)
    assert rec.kinds == [
        "agent_start", "turn_start", "model_request", "model_response",
        "tool_start", "gate_decision", "tool_end", "tool_skipped",
        "turn_start", "steering_injected", "model_request", "model_response", "agent_end",
    ]
    injected = rec.events[9]
    assert injected.message == Message("user", "use the other file")
    assert injected.turn == 2
    assert result.messages == (
        Message("user", "go"),
        calls("a", "b"),
        tool_msg("a"),
        tool_msg("b", "skipped: the user sent a new message", True),
        Message("user", "use the other file"),
        Message("assistant", "done"),
    )
    assert result.summary.end_reason is EndReason.stop
    assert result.follow_ups == ()


async def test_steering_during_a_final_answer_keeps_the_run_going(autojump_clock: Clock) -> None:
    run, _tool, _rec = setup([Blocked("first"), "second"])
    model = run.agent.model
    assert isinstance(model, ScriptedModel)

    async def poke() -> None:
        run.steer("and also")
        model.release()

    result = await drive(run, poke)
    assert result.output == "second"
    assert result.summary.turns == 2
    assert result.messages[-3:] == (
        Message("assistant", "first"), Message("user", "and also"), Message("assistant", "second")
    )


async def test_steering_without_turns_left_becomes_a_follow_up(autojump_clock: Clock) -> None:
    run, _tool, rec = setup([Blocked("only")], max_turns=1)
    model = run.agent.model
    assert isinstance(model, ScriptedModel)

    async def poke() -> None:
        run.follow_up("first follow-up")
        run.steer("too late")
        model.release()

    result = await drive(run, poke)
    assert result.output == "only"
    assert result.summary.end_reason is EndReason.stop
    assert result.follow_ups == ("first follow-up", "too late")
    assert rec.kinds[-3:] == ["follow_up_queued", "follow_up_queued", "agent_end"]
    assert [e.text for e in rec.events[-3:-1]] == ["first follow-up", "too late"]


async def test_steer_and_follow_up_before_start(autojump_clock: Clock) -> None:
    run, _tool, rec = setup(["ok"])
    run.steer("be short")
    run.follow_up("then this")
    result = await run.run()
    assert rec.kinds == ["agent_start", "turn_start", "steering_injected", "follow_up_queued",
                         "model_request", "model_response", "agent_end"]
    assert result.messages[:2] == (Message("user", "go"), Message("user", "be short"))
    assert result.follow_ups == ("then this",)


async def test_steering_survives_an_abort(autojump_clock: Clock) -> None:
    run, _tool, _rec = setup([Blocked("never")])
    run.steer("hint")

    async def poke() -> None:
        run.abort()

    result = await drive(run, poke)
    assert result.messages == (Message("user", "go"), Message("user", "hint"))
    assert result.summary.end_reason is EndReason.aborted


async def test_an_interrupt_turns_pending_steering_into_follow_ups(autojump_clock: Clock) -> None:
    run, tool, _rec = setup([calls("a"), "summary"])

    async def poke() -> None:
        run.steer("later")
        run.interrupt()
        tool.release()

    result = await drive(run, poke)
    assert result.summary.end_reason is EndReason.interrupted
    assert result.follow_ups == ("later",)
    assert Message("user", "later") not in result.messages


async def test_put_delivers_any_pending_message_with_its_event(autojump_clock: Clock) -> None:
    from agentcore import InboxMessage

    run, _, rec = setup(["ok"])
    run.put(InboxMessage(Message("user", "[result] 42"), EventKind.steering_injected))
    result = await run.run()
    assert result.messages[1] == Message("user", "[result] 42")
    assert rec.kinds[2] == "steering_injected"
    assert result.follow_ups == ()
    with pytest.raises(RunEndedError):
        run.put(InboxMessage(Message("user", "late"), EventKind.steering_injected))


async def test_unread_pending_without_follow_up_text_is_dropped(autojump_clock: Clock) -> None:
    from agentcore import InboxMessage

    run, _, _ = setup([Blocked("only")], max_turns=1)
    model = run.agent.model
    assert isinstance(model, ScriptedModel)

    async def poke() -> None:
        run.put(InboxMessage(Message("user", "[result] late"), EventKind.steering_injected))
        model.release()

    result = await drive(run, poke)
    assert result.follow_ups == ()
    assert result.output == "only"
