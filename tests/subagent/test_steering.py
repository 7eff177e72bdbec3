"""Task.interrupt() and Task.steer() reach the running agent (issue 5.2); the default
message bound of a subagent's conversation (issue 5.5)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentcore import EndReason, Message, RunEndedError
from agentcore._steering import INTERRUPT_NOTE
from agentcore.testing import Blocked, RecordingTool, ScriptedModel, tool_call_reply
from subagent import Defaults, Spec, SpecError, TaskStatus, open_pool
from subagent._pool._lifecycle import FRAMING

Clock = trio.testing.MockClock


async def test_interrupt_a_running_task(autojump_clock: Clock) -> None:
    tool = RecordingTool("slow", block=True)
    model = ScriptedModel([tool_call_reply("slow", id="c1"), "what I have so far"])
    async with open_pool() as pool:
        pool.register(Spec("a", model=model, tools=[tool]))
        task = await pool.submit("a", "work")
        await trio.testing.wait_all_tasks_blocked()
        task.interrupt()
        tool.release()
        result = await task.wait()
    assert result.output == "what I have so far"
    assert result.summary.end_reason is EndReason.interrupted
    assert task.status is TaskStatus.finished
    assert model.requests[1].tools == ()
    assert model.requests[1].messages[-1] == Message("user", INTERRUPT_NOTE)


async def test_steer_a_running_task(autojump_clock: Clock) -> None:
    model = ScriptedModel([Blocked("first"), "second"])
    async with open_pool() as pool:
        pool.register(Spec("a", model=model))
        task = await pool.submit("a", "work")
        await trio.testing.wait_all_tasks_blocked()
        task.steer("focus on tests")
        model.release()
        result = await task.wait()
    assert result.output == "second"
    assert model.requests[1].messages[-2:] == (
        Message("assistant", "first"), Message("user", "focus on tests")
    )


async def test_steer_and_interrupt_a_queued_task(autojump_clock: Clock) -> None:
    model = ScriptedModel([Blocked("one"), "summary of two"])
    async with open_pool(max_concurrent=1) as pool:
        pool.register(Spec("a", model=model))
        first = await pool.submit("a", "1")
        second = await pool.submit("a", "2")
        await trio.testing.wait_all_tasks_blocked()
        assert second.status is TaskStatus.queued
        second.steer("be brief")
        second.interrupt()
        model.release()
        assert (await first.wait()).output == "one"
        result = await second.wait()
    assert result.summary.end_reason is EndReason.interrupted
    assert result.output == "summary of two"
    assert model.requests[1].messages == (
        Message("system", FRAMING),
        Message("user", "2"),
        Message("user", INTERRUPT_NOTE),
    )
    assert result.summary.turns == 1


async def test_after_the_end_steer_raises_and_interrupt_does_nothing(
    autojump_clock: Clock,
) -> None:
    async with open_pool() as pool:
        pool.register(Spec("a", model=ScriptedModel(["done"])))
        task = await pool.submit("a", "work")
        await task.wait()
        task.interrupt()
        with pytest.raises(RunEndedError, match=r"^cannot steer: run a/0001 has ended"):
            task.steer("too late")


async def test_steering_a_task_cancelled_in_the_queue_raises(autojump_clock: Clock) -> None:
    model = ScriptedModel([Blocked("one")])
    async with open_pool(max_concurrent=1) as pool:
        pool.register(Spec("a", model=model))
        await pool.submit("a", "1")
        second = await pool.submit("a", "2")
        second.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert second.done
        with pytest.raises(RunEndedError, match=r"^cannot steer: task a/0002 has ended$"):
            second.steer("x")
        second.interrupt()
        pool.cancel()


async def test_a_subagent_keeps_at_most_max_messages(autojump_clock: Clock) -> None:
    assert Spec("a").max_messages == 50
    script = [tool_call_reply("t", id=f"c{i}") for i in range(4)] + ["done"]
    model = ScriptedModel(script)
    async with open_pool() as pool:
        pool.register(Spec("a", model=model, tools=[RecordingTool("t")], max_messages=4))
        result = await (await pool.submit("a", "work")).wait()
    assert result.output == "done"
    assert [len(r.messages) for r in model.requests] == [2, 4, 3, 3, 3]
    assert all(r.messages[0] == Message("system", FRAMING) for r in model.requests)


async def test_max_messages_must_be_positive() -> None:
    with pytest.raises(SpecError, match=r"^spec 'a': max_messages must be at least 1, not 0$"):
        Spec("a", model=ScriptedModel([]), max_messages=0).inherit(Defaults())
