"""The conservation law under random workloads (issue 15): every event the pool
produces is delivered or counted, whatever the consumer does (fast, slow, stalled,
gone with or without closing the stream), the stream's size and overflow policy,
the tasks' limits and the cancels.

Production is recorded by :class:`Recorder`, a Stream that notes every event offered
to it (by any path) and what became of each send, so the law is checked per event
against a count the stream under test does not keep.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict

import attrs
import pytest
import trio
import trio.testing
from hypothesis import event as label
from hypothesis import given
from hypothesis import strategies as st

from agentcore import Message, ModelError, ModelRequest, ModelResponse, ToolCall
from agentcore.testing import RecordingTool
from subagent import Event, Pool, PoolClosedError, Spec, Stream, SubagentTool, Task, open_pool
from subagent.testing import check_events

from .helpers import all_tasks

TERMINAL = {"task_finished", "task_cancelled"}


class Recorder(Stream):
    """A Stream that records each event offered to it, when, and whether its send
    was cancelled."""

    def __init__(self, buffer: int, overflow: str) -> None:
        super().__init__(buffer, overflow=overflow)  # type: ignore[arg-type]
        self.produced: list[tuple[float, Event]] = []
        self.cancelled: set[int] = set()

    async def send(self, event: Event) -> None:
        self.produced.append((trio.current_time(), event))
        try:
            await super().send(event)
        except trio.Cancelled:
            self.cancelled.add(id(event))
            raise

    def send_nowait(self, event: Event) -> None:
        # The emitter's synchronous path (Emitter.emit_nowait) sends here directly;
        # send() does too, after recording the event.
        if not self.produced or self.produced[-1][1] is not event:
            self.produced.append((trio.current_time(), event))
        super().send_nowait(event)

    def _send_reserved(self, event: Event) -> None:
        self.produced.append((trio.current_time(), event))
        super()._send_reserved(event)

    def _drop_unpaired(self, event: Event) -> None:
        self.produced.append((trio.current_time(), event))
        super()._drop_unpaired(event)


@attrs.frozen
class Plan:
    """One root task: its model calls each take ``delay``; it makes its ``steps``
    (a tool call, a waited-for subagent, a background subagent) one per turn, then
    answers, or fails."""

    delay: float
    steps: tuple[str, ...]
    fail: bool


class PlanModel:
    def __init__(self, plans: list[Plan], leaf_delay: float) -> None:
        self.plans = plans
        self.leaf_delay = leaf_delay

    async def complete(self, request: ModelRequest) -> ModelResponse:
        text = request.messages[1].content
        if text.startswith("leaf"):
            await trio.sleep(self.leaf_delay)
            return ModelResponse(Message("assistant", "leaf done"))
        plan = self.plans[int(text.removeprefix("plan "))]
        await trio.sleep(plan.delay)
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn < len(plan.steps):
            step = plan.steps[turn]
            if step == "tool":
                call = ToolCall(f"c{turn}", "echo", "{}")
            else:
                arguments = {"agent": "leaf", "task": "leaf", "wait": step == "child"}
                call = ToolCall(f"c{turn}", "subagent", json.dumps(arguments))
            return ModelResponse(Message("assistant", tool_calls=(call,)), "tool_calls")
        if plan.fail:
            raise ModelError("planned failure")
        return ModelResponse(Message("assistant", "done"))


@pytest.mark.slow
@given(st.data())
def test_every_event_is_delivered_or_counted(data: st.DataObject) -> None:
    buffer = data.draw(st.sampled_from([0, 1, 3, 16]), label="buffer")
    overflow = data.draw(st.sampled_from(["block", "block", "drop_newest"]), label="overflow")
    speed = data.draw(st.sampled_from([0.0, 0.0, 0.1, 1.0, 6.0]), label="seconds per event")
    stall_at, stall_for = data.draw(
        st.sampled_from([(math.inf, 0.0), (0.0, 50.0), (1.0, 8.0), (3.0, 400.0)]),
        label="stall")
    vanish_at = data.draw(st.sampled_from([math.inf, math.inf, 0.0, 1.5, 4.0]), label="vanish")
    close_on_exit = data.draw(st.booleans(), label="consumer closes on exit")
    max_concurrent = data.draw(st.integers(1, 3), label="max_concurrent")
    timeout = data.draw(st.sampled_from([None, 2.0, 5.0, 20.0]), label="timeout")
    idle_timeout = data.draw(st.sampled_from([3.0, 300.0]), label="idle_timeout")
    leaf_delay = data.draw(st.sampled_from([0.0, 1.0, 4.0]), label="leaf delay")
    plans = [
        Plan(
            data.draw(st.sampled_from([0.0, 0.5, 2.0])),
            tuple(data.draw(st.lists(st.sampled_from(["tool", "child", "bg"]), max_size=3))),
            data.draw(st.integers(0, 4)) == 0,
        )
        for _ in range(data.draw(st.integers(1, 5), label="roots"))
    ]
    submit_gap = data.draw(st.sampled_from([0.0, 1.0]), label="submit gap")
    cancels = data.draw(st.lists(
        st.tuples(st.sampled_from([0.0, 0.5, 2.0, 6.0]), st.integers(-1, len(plans) - 1)),
        max_size=2), label="cancels (time, root or -1 for the pool)")

    stream = Recorder(buffer, overflow)
    received: list[Event] = []
    submitted: list[Task] = []
    closed_early = [False]

    async def consume() -> None:
        stalled = False
        with trio.CancelScope(deadline=vanish_at):
            try:
                while True:
                    if not stalled and trio.current_time() >= stall_at:
                        stalled = True
                        await trio.sleep(stall_for)
                    try:
                        received.append(await stream.receive())
                    except trio.EndOfChannel:
                        return
                    if speed:
                        await trio.sleep(speed)
            finally:
                if close_on_exit and not stream.statistics().closed:
                    closed_early[0] = True
                    stream.close()

    async def canceller(pool: Pool, at: float, index: int) -> None:
        await trio.sleep(at)
        if index < 0:
            pool.cancel()
        elif index < len(submitted):
            submitted[index].cancel()

    async def main() -> None:
        with trio.fail_after(100_000):
            async with trio.open_nursery() as outer:
                outer.start_soon(consume)
                async with open_pool(max_concurrent=max_concurrent, max_depth=2,
                                     events=stream) as pool:
                    model = PlanModel(plans, leaf_delay)
                    pool.register(Spec("w", model=model, timeout=timeout,
                                       idle_timeout=idle_timeout,
                                       tools=[RecordingTool(), SubagentTool(pool)]))
                    pool.register(Spec("leaf", model=model, timeout=timeout,
                                       idle_timeout=idle_timeout))
                    for at, index in cancels:
                        outer.start_soon(canceller, pool, at, index)
                    for n in range(len(plans)):
                        try:
                            submitted.append(await pool.submit("w", f"plan {n}"))
                        except PoolClosedError:
                            break
                        await trio.sleep(submit_gap)
                    for task in submitted:
                        await task._done.wait()
                # The pool block has exited: every task has ended. A consumer still
                # reading drains what is left; one that went away leaves it.
                if not stream.statistics().closed:
                    stream.close()
        # Whatever is still buffered, a new consumer reads.
        received.extend(stream.receive_nowait() for _ in range(stream.statistics().buffered))

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    tasks = all_tasks(submitted)
    stats = stream.statistics()
    label(f"tasks: {min(len(tasks), 10)}")
    label(f"statuses: {sorted({str(t.status) for t in tasks})}")
    label(f"counted: dropped {stats.dropped > 0}, after close {stats.dropped_after_close > 0}, "
          f"cancelled {stats.dropped_cancelled > 0}, reserve used {stats.reserved > 0}")
    produced = [event for _, event in stream.produced]
    ids = [id(e) for e in produced]
    assert len(set(ids)) == len(ids), "an event offered twice"
    # The law: delivered + counted == produced, and what was delivered was produced,
    # once, in each run's order.
    assert stats.buffered == 0
    assert stats.sent == len(received)
    assert len({id(e) for e in received}) == len(received), "an event delivered twice"
    assert {id(e) for e in received} <= set(ids)
    counted = stats.dropped + stats.dropped_after_close + stats.dropped_cancelled
    assert len(received) + counted == len(produced)
    assert not {id(e) for e in received} & stream.cancelled
    assert stats.dropped_cancelled <= len(stream.cancelled)
    delivered = {id(e) for e in received}
    by_path: dict[tuple[str, ...], list[Event]] = defaultdict(list)
    for event in produced:
        by_path[event.path].append(event)
    got: dict[tuple[str, ...], list[Event]] = defaultdict(list)
    for event in received:
        got[event.path].append(event)
    for path, events in by_path.items():
        assert got[path] == [e for e in events if id(e) in delivered], f"{path}: order"
    if overflow == "block":
        assert stats.dropped == 0
    if not closed_early[0]:
        # The stream stayed open until every task had ended: only cancelled sends
        # (and drop_newest) lost events.
        assert stats.dropped_after_close == 0
        assert stats.dropped_cancelled == len(stream.cancelled)
    else:
        assert stats.dropped_cancelled + stats.dropped_after_close >= len(stream.cancelled)

    # Every task produced one terminal event; with the stream open it was delivered,
    # and start and end pair up.
    assert set(by_path) == {t.path for t in tasks}
    for task in tasks:
        kinds = [str(e.kind) for e in by_path[task.path]]
        assert sum(k in TERMINAL for k in kinds) == 1
        assert kinds[-1] in TERMINAL or kinds[-1] == "task_orphaned"
        delivered_kinds = [str(e.kind) for e in got[task.path]]
        if not closed_early[0]:
            assert sum(k in TERMINAL for k in delivered_kinds) == 1
            assert ("agent_start" in delivered_kinds) == ("agent_end" in delivered_kinds)
        elif "agent_end" in delivered_kinds:
            assert "agent_start" in delivered_kinds
    if overflow == "block" and not closed_early[0]:
        check_events(received, max_concurrent=max_concurrent)

    # Limits fire whatever the task is doing: a task with a timeout and no subagents
    # ends within it, blocked on the stream or not.
    times: dict[tuple[tuple[str, ...], str], float] = {}
    for at, event in stream.produced:
        times.setdefault((event.path, str(event.kind)), at)
    for task in tasks:
        if timeout is None or task.children or (task.path, "task_started") not in times:
            continue
        end = "task_cancelled" if (task.path, "task_cancelled") in times else "task_finished"
        # (1e-9: clock readings like 2.9 + 2.0 are not exact in binary floating point)
        assert times[(task.path, end)] - times[(task.path, "task_started")] <= timeout + 1e-9
