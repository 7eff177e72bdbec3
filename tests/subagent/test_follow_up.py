"""Task.follow_up() and Result.follow_ups (issue 18 item 4): queued before the run
starts, while it runs, refused after it ended; carried out by the caller as a new
submit with ``history=result.messages``."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from agentcore import EventKind, Message, RunEndedError
from agentcore.testing import Blocked, Delayed, RecordingTool, ScriptedModel, tool_call_reply
from subagent import Event, Spec, Stream, TaskCancelled, TaskStatus, open_pool
from subagent._pool._lifecycle import FRAMING

from .helpers import drain

Clock = trio.testing.MockClock


def follow_up_events(events: list[Event]) -> list[tuple[tuple[str, ...], str]]:
    return [
        (e.path, e.event.text)
        for e in events
        if e.kind is EventKind.follow_up_queued and e.event is not None
    ]


async def test_follow_ups_sent_while_queued_come_back_in_the_result(
    autojump_clock: Clock,
) -> None:
    model = ScriptedModel([Blocked("one"), "two"])
    events = Stream(64)
    async with open_pool(max_concurrent=1, events=events) as pool:
        pool.register(Spec("a", model=model))
        first = await pool.submit("a", "1")
        second = await pool.submit("a", "2")
        await trio.testing.wait_all_tasks_blocked()
        assert second.status is TaskStatus.queued
        second.follow_up("then check the tests")
        second.follow_up("then write it up")
        model.release()
        await first.wait()
        result = await second.wait()
    events.close()
    assert result.follow_ups == ("then check the tests", "then write it up")
    assert result.output == "two"
    # The run does not read them: its conversation is the task text and the answer.
    assert model.requests[1].messages == (Message("system", FRAMING), Message("user", "2"))
    assert result.messages == (Message("user", "2"), Message("assistant", "two"))
    assert follow_up_events(await drain(events)) == [
        (("a/0002",), "then check the tests"),
        (("a/0002",), "then write it up"),
    ]


async def test_a_follow_up_sent_while_running_comes_back(autojump_clock: Clock) -> None:
    model = ScriptedModel([Delayed(3.0, "done")])
    events = Stream(64)
    async with open_pool(events=events) as pool:
        pool.register(Spec("a", model=model))
        task = await pool.submit("a", "work")
        await trio.sleep(1.0)
        assert task.status is TaskStatus.running
        task.follow_up("and the docs")
        result = await task.wait()
        assert trio.current_time() == 3.0
    events.close()
    assert result.follow_ups == ("and the docs",)
    assert result.summary.turns == 1
    assert follow_up_events(await drain(events)) == [(("a/0001",), "and the docs")]


async def test_after_the_end_a_follow_up_raises(autojump_clock: Clock) -> None:
    async with open_pool() as pool:
        pool.register(Spec("a", model=ScriptedModel(["done"])))
        task = await pool.submit("a", "work")
        result = await task.wait()
        with pytest.raises(
            RunEndedError,
            match=r"^cannot follow_up: run a/0001 has ended; start a new run instead$",
        ):
            task.follow_up("too late")
    assert result.follow_ups == ()


async def test_a_follow_up_to_a_task_cancelled_in_the_queue_raises(
    autojump_clock: Clock,
) -> None:
    model = ScriptedModel([Blocked("one")])
    async with open_pool(max_concurrent=1) as pool:
        pool.register(Spec("a", model=model))
        await pool.submit("a", "1")
        second = await pool.submit("a", "2")
        second.follow_up("queued, then cancelled")
        second.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert second.done
        with pytest.raises(RunEndedError, match=r"^cannot follow up: task a/0002 has ended$"):
            second.follow_up("x")
        pool.cancel()


async def test_steering_the_run_did_not_read_follows_the_follow_ups(
    autojump_clock: Clock,
) -> None:
    # With no turn left, steering that arrives during the last model call is not read:
    # it comes back after the follow-ups, in the order received.
    model = ScriptedModel([Blocked("answer")])
    async with open_pool() as pool:
        pool.register(Spec("a", model=model, max_turns=1))
        task = await pool.submit("a", "work")
        await trio.testing.wait_all_tasks_blocked()
        task.steer("also this")
        task.follow_up("next, that")
        model.release()
        result = await task.wait()
    assert result.follow_ups == ("next, that", "also this")
    assert result.messages == (Message("user", "work"), Message("assistant", "answer"))


async def test_the_caller_runs_follow_ups_as_a_continuation(autojump_clock: Clock) -> None:
    model = ScriptedModel([Delayed(2.0, "draft ready"), Delayed(1.0, "tests pass")])
    async with open_pool() as pool:
        pool.register(Spec("dev", model=model))
        task = await pool.submit("dev", "write the parser")
        task.follow_up("now run the tests")
        result = await task.wait()
        steps = 1
        while result.follow_ups:
            text, *rest = result.follow_ups
            task = await pool.submit("dev", text, history=result.messages)
            for later in rest:
                task.follow_up(later)
            result = await task.wait()
            steps += 1
        assert trio.current_time() == 3.0
    assert steps == 2
    assert result.messages == (
        Message("user", "write the parser"),
        Message("assistant", "draft ready"),
        Message("user", "now run the tests"),
        Message("assistant", "tests pass"),
    )


@given(
    times=st.lists(st.integers(0, 12), max_size=8),
    ahead=st.integers(0, 4),
    pace=st.integers(0, 3),
    cancel_at=st.one_of(st.none(), st.integers(0, 12)),
)
@pytest.mark.slow
def test_a_follow_up_is_refused_or_comes_back_in_order(
    times: list[int], ahead: int, pace: int, cancel_at: int | None
) -> None:
    # Follow-ups sent at any instant (the task queued behind another, running a model
    # call or a tool, ending, ended): each either raises RunEndedError, and only once
    # the run has ended or the task resolved, or is in Result.follow_ups, in the
    # order accepted. A task cancelled first has no Result: only the refusals count.
    async def main() -> None:
        script = [Delayed(pace, tool_call_reply("t", id="c1")), Delayed(pace, "done")]
        accepted: list[str] = []
        async with open_pool(max_concurrent=1) as pool:
            pool.register(Spec("ahead", model=ScriptedModel([Delayed(ahead, "x")])))
            pool.register(Spec("b", model=ScriptedModel(script), tools=[RecordingTool("t")]))
            await pool.submit("ahead", "x")
            task = await pool.submit("b", "y")

            async def send(number: int, at: int) -> None:
                await trio.sleep(at / 2)
                try:
                    task.follow_up(f"f{number}")
                except RunEndedError:
                    run = task._run
                    assert task.done or (run is not None and run.ended)
                else:
                    accepted.append(f"f{number}")

            async def cancel(at: int) -> None:
                await trio.sleep(at / 2)
                task.cancel()

            async with trio.open_nursery() as nursery:
                for number, at in enumerate(times):
                    nursery.start_soon(send, number, at)
                if cancel_at is not None:
                    nursery.start_soon(cancel, cancel_at)
            try:
                result = await task.wait()
            except TaskCancelled:
                assert cancel_at is not None
                return
        assert result.follow_ups == tuple(accepted)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
