"""Bugs the proof tests found. A test pins an unfixed one as a strict xfail; once fixed,
it stays here as the regression test."""

from __future__ import annotations

import contextlib

import trio
import trio.testing

from agentcore import ModelRequest, ModelResponse
from subagent import Event, Spec, Stream, SubagentTool, TaskError, TaskStatus, open_pool
from subagent.testing import Job, Workload, check_events

from .faults import Fault, FaultyModel, FaultyTool, Plan


async def test_cancelled_delegation_resumes_the_parent_without_a_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Root 1 lends its slot to delegate; root 2 takes the slot and hangs in a tool;
    # both tool calls time out at 120 s; root 1 then runs while root 2 holds the one slot.
    workload = Workload((
        Job(1, 0.0, True, (Job(2, 0.0, True),)),
        Job(3, 0.0, True, (Job(4, 0.0, True),)),
    ))
    events = Stream(0)
    log: list[Event] = []

    async def consume() -> None:
        async for event in events:
            log.append(event)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with open_pool(max_concurrent=1, events=events) as pool:
            tool = FaultyTool(SubagentTool(pool), Plan("tool", {1: Fault.hang}))
            model = FaultyModel(workload.model(), Plan("model", {}))
            pool.register(Spec("worker", model=model, tools=[tool]))
            tasks = [await pool.submit("worker", workload.input(j)) for j in workload.roots]
            for task in tasks:
                with contextlib.suppress(TaskError):
                    await task.wait()
        events.close()
    check_events(log, max_concurrent=1)


class _Hang:
    """A model whose calls never return (until cancelled)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_submit_under_a_cancelled_tasks_path_is_cancelled_whether_or_not_it_ended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_pool() as pool:
        pool.register(Spec("w", model=_Hang()))
        parent = await pool.submit("w", "parent")
        await trio.testing.wait_all_tasks_blocked()
        parent.cancel()
        early = pool.submit_nowait("w", "early", parent_path=parent.path)
        await trio.testing.wait_all_tasks_blocked()
        assert parent.done
        late = pool.submit_nowait("w", "late", parent_path=parent.path)
        await trio.testing.wait_all_tasks_blocked()
        try:
            assert early.status is TaskStatus.cancelled
            assert late.status is early.status, late
        finally:
            pool.cancel()
