"""Delivered or counted, always (issue 15): every event a run produces reaches the
consumer or is counted in ``StreamStatistics``, under slow, stalled and vanished
consumers; limits fire while a task is blocked on backpressure.

Production is counted by :class:`CountingStream`, which records every event offered
to the stream whatever path it takes, so the law ``delivered + counted == produced``
is checked against an independent count, not against the stream's own.
"""

from __future__ import annotations

from collections import Counter

import pytest
import trio
import trio.testing

from agentcore import ModelRequest
from agentcore.testing import (
    Delayed,
    RecordingTool,
    ScriptedModel,
    ScriptItem,
    tool_call_reply,
)
from subagent import (
    Event,
    Spec,
    Stream,
    StreamStatistics,
    Task,
    TaskCancelled,
    TaskStatus,
    TaskTimeout,
    open_pool,
)

from .helpers import kinds

Clock = trio.testing.MockClock

#: One task whose run makes one tool call, then answers: 14 events.
ONE_TOOL_CALL = [
    "task_queued", "task_started", "agent_start",
    "turn_start", "model_request", "model_response",
    "tool_start", "gate_decision", "tool_end",
    "turn_start", "model_request", "model_response",
    "agent_end", "task_finished",
]


class CountingStream(Stream):
    """A Stream that records every event offered to it, by any path."""

    def __init__(self, buffer: int, **kwargs: object) -> None:
        super().__init__(buffer, **kwargs)  # type: ignore[arg-type]
        self.produced: list[Event] = []

    async def send(self, event: Event) -> None:
        # Recorded before the first checkpoint: a send cancelled there was produced too.
        self.produced.append(event)
        await super().send(event)

    def send_nowait(self, event: Event) -> None:
        # The emitter's synchronous path (Emitter.emit_nowait) sends here directly;
        # send() does too, after recording the event.
        if not self.produced or self.produced[-1] is not event:
            self.produced.append(event)
        super().send_nowait(event)

    def _send_reserved(self, event: Event) -> None:
        self.produced.append(event)
        super()._send_reserved(event)

    def _drop_unpaired(self, event: Event) -> None:
        self.produced.append(event)
        super()._drop_unpaired(event)


def counted(stats: StreamStatistics) -> int:
    return stats.dropped + stats.dropped_after_close + stats.dropped_cancelled


def one_tool_call(delay: float = 0.0) -> ScriptedModel:
    def reply(request: ModelRequest) -> ScriptItem:
        if request.messages[-1].role == "tool":
            return "done"
        return tool_call_reply("echo")

    return ScriptedModel(reply)


def check_law(stream: CountingStream, received: list[Event]) -> None:
    """Every event offered to ``stream`` was received or counted, exactly."""
    stats = stream.statistics()
    assert stats.buffered == 0
    assert len(received) + counted(stats) == len(stream.produced)
    assert stats.sent == len(received)
    assert not Counter(map(id, received)) - Counter(map(id, stream.produced))


async def test_slow_consumer_on_a_zero_buffer_gets_every_event(autojump_clock: Clock) -> None:
    stream = CountingStream(0)
    received: list[Event] = []

    async def consume() -> None:
        while True:
            await trio.sleep(6)
            try:
                received.append(await stream.receive())
            except trio.EndOfChannel:
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with open_pool(events=stream) as pool:
            pool.register(Spec("a", model=one_tool_call(), tools=[RecordingTool()]))
            task = await pool.submit("a", "x")
            assert (await task.wait()).output == "done"
        stream.close()
    assert kinds(received) == ONE_TOOL_CALL
    check_law(stream, received)
    assert counted(stream.statistics()) == 0


@pytest.mark.slow
async def test_a_thousand_tasks_and_a_slow_consumer(autojump_clock: Clock) -> None:
    stream = CountingStream(0)
    received: list[Event] = []

    async def consume() -> None:
        while True:
            try:
                received.append(await stream.receive())
            except trio.EndOfChannel:
                return
            await trio.sleep(0.1)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with open_pool(max_concurrent=64, events=stream) as pool:
            pool.register(Spec("a", model=one_tool_call(), tools=[RecordingTool()]))
            tasks = [await pool.submit("a", str(n)) for n in range(1000)]
        stream.close()
    assert all(t.status is TaskStatus.finished for t in tasks)
    assert len(received) == 14_000
    by_kind = Counter(kinds(received))
    assert by_kind == Counter({kind: 1000 * n for kind, n in Counter(ONE_TOOL_CALL).items()})
    by_path: dict[tuple[str, ...], list[str]] = {t.path: [] for t in tasks}
    for event in received:
        by_path[event.path].append(str(event.kind))
    assert all(run == ONE_TOOL_CALL for run in by_path.values())
    check_law(stream, received)
    stats = stream.statistics()
    assert (stats.sent, stats.dropped, stats.dropped_after_close, stats.dropped_cancelled) == (
        14_000, 0, 0, 0)


async def test_a_consumer_stalled_past_idle_timeout(autojump_clock: Clock) -> None:
    # 1,000 tasks with idle_timeout=5, 64 at a time; the consumer reads nothing for
    # 100 s, then drains. Every task times out blocked on its agent_start, 5 s after
    # it started, and every task's terminal event still reaches the consumer.
    stream = CountingStream(0)
    received: list[Event] = []
    stalled = trio.Event()

    async def consume() -> None:
        await stalled.wait()
        async for event in stream:
            received.append(event)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with open_pool(max_concurrent=64, events=stream) as pool:
            pool.register(Spec("a", model=one_tool_call(), tools=[RecordingTool()],
                               idle_timeout=5.0))
            tasks = [await pool.submit("a", str(n)) for n in range(1000)]
            await trio.sleep(100)
            assert all(t.done for t in tasks)
            stalled.set()
        stream.close()
    assert trio.current_time() == 100.0
    assert all(t.status is TaskStatus.timed_out for t in tasks)
    assert {t._summary.duration for t in tasks if t._summary is not None} == {5.0}
    assert Counter(kinds(received)) == {
        "task_queued": 1000, "task_started": 1000, "task_finished": 1000}
    terminal = [e.path for e in received if e.kind == "task_finished"]
    assert sorted(terminal) == sorted(t.path for t in tasks)
    check_law(stream, received)
    # The lifecycle events took the reserve; each agent_start waited, then was cancelled.
    assert stream.statistics() == StreamStatistics(
        buffered=0, max_buffer=0, sent=3000, dropped=0, dropped_after_close=0,
        dropped_cancelled=1000, reserved=3000, closed=True, waiting_senders=0,
        waiting_receivers=0,
    )


def one_second_per_call() -> ScriptedModel:
    def reply(request: ModelRequest) -> ScriptItem:
        if request.messages[-1].role == "tool":
            return Delayed(1.0, "done")
        return Delayed(1.0, tool_call_reply("echo"))

    return ScriptedModel(reply)


async def run_vanishing(stream: CountingStream, received: list[Event], *,
                        close_on_exit: bool) -> list[Task]:
    # 1,000 tasks, 64 at a time, each taking 2 s with a reading consumer; the
    # consumer task is cancelled at t=10.5 (round 5 of 16 is in its first model call).
    async def consume() -> None:
        with trio.CancelScope(deadline=10.5):
            try:
                async for event in stream:
                    received.append(event)
            finally:
                if close_on_exit:
                    stream.close()

    with trio.fail_after(3000):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            async with open_pool(max_concurrent=64, events=stream) as pool:
                pool.register(Spec("a", model=one_second_per_call(),
                                   tools=[RecordingTool()], timeout=60.0))
                return [await pool.submit("a", str(n)) for n in range(1000)]


async def test_a_vanished_consumer_makes_tasks_time_out(autojump_clock: Clock) -> None:
    stream = CountingStream(16)
    received: list[Event] = []
    tasks = await run_vanishing(stream, received, close_on_exit=False)
    # Rounds 0-4 (320 tasks) finished by t=10; round 5 started at 10 and times out
    # at 70; the other 616 tasks block on their agent_start and time out 60 s after
    # they start, 64 at a time: 10 more rounds.
    assert trio.current_time() == 70.0 + 10 * 60.0
    statuses = Counter(t.status for t in tasks)
    assert statuses == {TaskStatus.finished: 320, TaskStatus.timed_out: 680}
    for task in tasks[384:]:
        assert task._summary is not None
        assert task._summary.duration == 60.0
    stats = stream.statistics()
    # Each timed-out task had exactly one send cancelled: the one it was blocked on.
    assert (stats.dropped, stats.dropped_after_close, stats.dropped_cancelled) == (0, 0, 680)
    assert (stats.closed, stats.waiting_senders, stats.waiting_receivers) == (False, 0, 0)
    assert stats.buffered == stats.sent - len(received)
    # Nothing was lost: a new consumer gets the rest.
    stream.close()
    received.extend([event async for event in stream])
    check_law(stream, received)
    terminal = Counter(e.path for e in received if e.kind == "task_finished")
    assert terminal == Counter(t.path for t in tasks)


async def test_a_consumer_that_closes_on_its_way_out_releases_the_tasks(
    autojump_clock: Clock,
) -> None:
    stream = CountingStream(16)
    received: list[Event] = []
    tasks = await run_vanishing(stream, received, close_on_exit=True)
    # Round 5 ends at 12, the remaining 616 tasks take 10 rounds of 2 s.
    assert trio.current_time() == 12.0 + 10 * 2.0
    assert all(t.status is TaskStatus.finished for t in tasks)
    stats = stream.statistics()
    assert (stats.dropped, stats.dropped_cancelled, stats.closed) == (0, 0, True)
    assert (stats.waiting_senders, stats.waiting_receivers, stats.buffered) == (0, 0, 0)
    # By t=10.5 it had read every task_queued, rounds 0-4 whole, and the first four
    # run events of round 5; the rest was dropped after its close.
    assert len(received) == 1000 + 320 * 13 + 64 * 4
    assert stats.dropped_after_close == 14_000 - len(received)
    check_law(stream, received)


async def run_unread(spec: Spec, stream: CountingStream, *, cancel_at: float | None = None,
                     ) -> tuple[Task, list[Event]]:
    # One task, nobody reading until the pool block exits; then the stream is drained.
    async with open_pool(events=stream) as pool:
        pool.register(spec)
        task = await pool.submit(spec.name, "x")
        if cancel_at is not None:
            await trio.sleep(cancel_at)
            task.cancel()
    stream.close()
    received = [event async for event in stream]
    check_law(stream, received)
    return task, received


def unread_stats(**changes: int) -> StreamStatistics:
    # A zero buffer that nobody read: the task's lifecycle events in the reserve,
    # its agent_start cancelled; the stream closed and drained since.
    fields = dict(buffered=0, max_buffer=0, sent=3, dropped=0, dropped_after_close=0,
                  dropped_cancelled=1, reserved=3, closed=True, waiting_senders=0,
                  waiting_receivers=0)
    return StreamStatistics(**{**fields, **changes})  # type: ignore[arg-type]


async def test_timeout_fires_while_blocked_on_backpressure(autojump_clock: Clock) -> None:
    stream = CountingStream(0)
    task, received = await run_unread(
        Spec("a", model=one_tool_call(), tools=[RecordingTool()], timeout=5.0), stream)
    assert trio.current_time() == 5.0
    assert task.status is TaskStatus.timed_out
    with pytest.raises(TaskTimeout, match=r"^task a/0001 timed out after 5s$"):
        await task.wait()
    assert kinds(received) == ["task_queued", "task_started", "task_finished"]
    assert stream.statistics() == unread_stats()


async def test_idle_timeout_fires_while_blocked_on_backpressure(autojump_clock: Clock) -> None:
    stream = CountingStream(0)
    task, received = await run_unread(
        Spec("a", model=one_tool_call(), tools=[RecordingTool()], idle_timeout=5.0), stream)
    assert trio.current_time() == 5.0
    with pytest.raises(TaskTimeout, match=r"^task a/0001 was idle for 5s: no event within"):
        await task.wait()
    assert kinds(received) == ["task_queued", "task_started", "task_finished"]
    assert stream.statistics() == unread_stats()


async def test_a_cancel_reaches_a_task_blocked_on_backpressure(autojump_clock: Clock) -> None:
    stream = CountingStream(0)
    task, received = await run_unread(
        Spec("a", model=one_tool_call(), tools=[RecordingTool()]), stream, cancel_at=2.0)
    assert trio.current_time() == 2.0
    with pytest.raises(TaskCancelled):
        await task.wait()
    assert kinds(received) == ["task_queued", "task_started", "task_cancelled"]
    assert stream.statistics() == unread_stats()


async def test_a_started_run_delivers_its_end_when_it_times_out_blocked(
    autojump_clock: Clock,
) -> None:
    # Room for three events: task_queued, task_started, agent_start; turn_start then
    # waits until the timeout, and the run's end still reaches the stream.
    stream = CountingStream(3)
    task, received = await run_unread(
        Spec("a", model=one_tool_call(), tools=[RecordingTool()], timeout=5.0), stream)
    assert trio.current_time() == 5.0
    assert task.status is TaskStatus.timed_out
    assert kinds(received) == [
        "task_queued", "task_started", "agent_start", "agent_end", "task_finished",
    ]
    assert stream.statistics() == unread_stats(
        max_buffer=3, sent=5, reserved=2)


async def test_drop_newest_drops_agent_end_with_its_agent_start(autojump_clock: Clock) -> None:
    stream = CountingStream(1, overflow="drop_newest")
    task, received = await run_unread(
        Spec("a", model=one_tool_call(), tools=[RecordingTool()]), stream)
    assert task.status is TaskStatus.finished
    # Every run event found the buffer full (task_queued in it): all 11 dropped,
    # agent_end with them since its agent_start was dropped.
    assert kinds(received) == ["task_queued", "task_started", "task_finished"]
    assert stream.statistics() == unread_stats(
        max_buffer=1, dropped=11, dropped_cancelled=0, reserved=2)
