"""A run's event sink in the pool (subagent._pool._emitter): the synchronous emit_nowait path
and the awaited one deliver the same events in the same order; a full stream or a
cancelled task falls back to waiting (backpressure unchanged); the idle watchdogs are
pushed back at most once per PUSH_RESOLUTION, at exact virtual times."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

import agentcore
from agentcore.testing import Blocked, Delayed, ScriptedModel, tool_call_reply
from subagent import Pool, Spec, Stream, SubagentTool, Task, open_pool
from subagent._pool._emitter import PUSH_RESOLUTION, Emitter, emitter

from .helpers import drain, kinds

Clock = trio.testing.MockClock


def ev(kind: agentcore.EventKind = agentcore.EventKind.turn_start) -> agentcore.Event:
    return agentcore.Event(kind, "r", "a")


@asynccontextmanager
async def parked(
    stream: Stream | None, idle_timeout: float | None = 30.0
) -> AsyncIterator[tuple[Pool, Task, Emitter]]:
    # A pool with one task parked in its model call, and that run's emitter.
    model = ScriptedModel([Blocked("done")])
    async with open_pool(events=stream) as pool:
        pool.register(Spec("w", model=model, idle_timeout=idle_timeout))
        task = await pool.submit("w", "go")
        await trio.testing.wait_all_tasks_blocked()
        assert task._run is not None
        sink = task._run._emit_to
        assert isinstance(sink, Emitter)
        yield pool, task, sink
        model.release()


async def test_emit_nowait_delivers_in_order_with_the_awaited_path() -> None:
    stream = Stream(100)
    async with parked(stream) as (_, task, sink):
        before = stream.statistics().sent
        assert sink.emit_nowait(ev(agentcore.EventKind.turn_start))
        await sink(ev(agentcore.EventKind.model_request))
        assert sink.emit_nowait(ev(agentcore.EventKind.model_response))
        assert stream.statistics().sent == before + 3
    stream.close()
    events = await drain(stream)
    assert kinds(events, task.path) == [
        "task_queued", "task_started", "agent_start", "turn_start", "model_request",
        "turn_start", "model_request", "model_response", "model_response", "agent_end",
        "task_finished",
    ]


async def test_a_full_stream_falls_back_to_waiting() -> None:
    # Stream(5): task_queued, task_started, agent_start, turn_start, model_request fill
    # it; then emit_nowait takes nothing and the awaited path waits for room.
    stream = Stream(5)
    async with parked(stream) as (_, task, sink):
        assert stream.statistics().buffered == 5
        assert not sink.emit_nowait(ev())
        assert stream.statistics().sent == 5
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sink, ev(agentcore.EventKind.retry))
            await trio.testing.wait_all_tasks_blocked()
            assert stream.statistics().waiting_senders == 1
            assert str(stream.receive_nowait().kind) == "task_queued"
        assert stream.statistics().waiting_senders == 0
        assert stream.statistics().sent == 6
        stream.close()
    assert kinds(await drain(stream), task.path) == [
        "task_started", "agent_start", "turn_start", "model_request", "retry",
    ]


async def test_a_cancelled_task_falls_back_to_the_awaited_path() -> None:
    stream = Stream(100)
    async with parked(stream) as (_, _task, sink):
        sent = stream.statistics().sent
        with trio.CancelScope() as scope:
            scope.cancel()
            assert not sink.emit_nowait(ev())
            assert stream.statistics().sent == sent
            await sink(ev())
        assert scope.cancelled_caught
        assert stream.statistics().sent == sent
        assert stream.statistics().dropped_cancelled == 1


async def test_drop_newest_drops_through_emit_nowait_and_counts() -> None:
    # Stream(4): model_request was dropped already.
    stream = Stream(4, overflow="drop_newest")
    async with parked(stream) as (_, _task, sink):
        assert stream.statistics().buffered == 4
        assert stream.statistics().dropped == 1
        assert sink.emit_nowait(ev())
        assert stream.statistics().dropped == 2
        assert stream.statistics().sent == 4


async def test_idle_push_at_most_once_per_resolution(autojump_clock: Clock) -> None:
    assert PUSH_RESOLUTION == 0.01
    async with parked(Stream(100), idle_timeout=30.0) as (_, task, sink):
        start = trio.current_time()
        assert task._scope.deadline == start + 30
        await trio.sleep(5)
        assert sink.emit_nowait(ev())
        assert task._scope.deadline == start + 35
        # 1/128 s later (under the resolution): not pushed.
        await trio.sleep(1 / 128)
        await sink(ev())
        assert task._scope.deadline == start + 35
        # 1/64 s after the push: pushed.
        await trio.sleep(1 / 128)
        assert sink.emit_nowait(ev())
        assert task._scope.deadline == start + 5 + 1 / 64 + 30


async def test_setting_the_limits_is_the_runs_first_push(autojump_clock: Clock) -> None:
    # The limits set at the run's start push its watchdog (Emitter.limited): its
    # events at that instant, and within PUSH_RESOLUTION of it, push nothing more.
    async with parked(Stream(100), idle_timeout=30.0) as (_, task, sink):
        start = trio.current_time()
        assert sink.pushed == start
        assert task._scope.deadline == start + 30
        await trio.sleep(1 / 128)
        assert sink.emit_nowait(ev())
        assert sink.pushed == start
        assert task._scope.deadline == start + 30


async def test_a_childs_limits_push_the_watchdogs_above_it(autojump_clock: Clock) -> None:
    # A delegated child's start is a push of every idle watchdog on its path: its
    # own (its limits) and its parent's, at the instant its limits are set.
    parent = ScriptedModel([
        Delayed(7, tool_call_reply("subagent", '{"agent": "c", "task": "x"}')), "done",
    ])
    child = ScriptedModel([Blocked("child done")])
    async with open_pool(events=Stream(1000)) as pool:
        pool.register(Spec("c", model=child, idle_timeout=20))
        pool.register(Spec("p", model=parent, tools=(SubagentTool(pool),), idle_timeout=30))
        task = await pool.submit("p", "go")
        await trio.sleep(7)
        await trio.testing.wait_all_tasks_blocked()
        assert trio.current_time() == 7
        (kid,) = task.children
        assert kid._run is not None
        sink = kid._run._emit_to
        assert isinstance(sink, Emitter)
        assert sink.pushed == 7
        assert kid._scope.deadline == 7 + 20
        assert task._scope.deadline == 7 + 30
        child.release()
        assert (await task.wait()).output == "done"
    # The run has ended: its limits are off, so nothing pushes its (exited) scope.
    assert task._limits is None and kid._limits is None


async def test_no_idle_timeout_pushes_nothing() -> None:
    async with parked(Stream(100), idle_timeout=None) as (_, task, sink):
        assert sink.clock is None
        assert sink.emit_nowait(ev())
        assert task._scope.deadline == float("inf")


@pytest.mark.parametrize("idle_timeout", [None, 30.0])
async def test_emitter_is_none_only_without_stream_observer_or_watchdog(
    idle_timeout: float | None,
) -> None:
    model = ScriptedModel([Blocked("done")])
    async with open_pool() as pool:
        pool.register(Spec("w", model=model, idle_timeout=idle_timeout))
        task = await pool.submit("w", "go")
        await trio.testing.wait_all_tasks_blocked()
        assert (emitter(task) is None) == (idle_timeout is None)
        task.cancel()


@agentcore.tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text


@pytest.mark.parametrize("buffer", [0, 1, 3, 64])
async def test_a_run_through_a_small_stream_delivers_every_event_in_order(buffer: int) -> None:
    # A slow consumer: each event waits for the consumer to take it (taken now only
    # when the stream has room).
    stream = Stream(buffer)
    got: list[str] = []

    async def consume() -> None:
        async for event in stream:
            got.append(str(event.kind))
            await trio.lowlevel.checkpoint()

    model = ScriptedModel([tool_call_reply("echo", json.dumps({"text": "a"})), "done"])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with open_pool(events=stream) as pool:
            pool.register(Spec("w", model=model, tools=(echo,)))
            task = await pool.submit("w", "go")
            assert (await task.wait()).output == "done"
        stream.close()
    assert got == [
        "task_queued", "task_started", "agent_start", "turn_start", "model_request",
        "model_response", "tool_start", "gate_decision", "tool_end", "turn_start",
        "model_request", "model_response", "agent_end", "task_finished",
    ]
    statistics = stream.statistics()
    assert (statistics.sent, statistics.dropped, statistics.dropped_cancelled) == (14, 0, 0)
