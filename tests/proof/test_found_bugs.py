"""Bugs the proof tests found. A test pins an unfixed one as a strict xfail; once fixed,
it stays here as the regression test."""

from __future__ import annotations

import contextlib

import trio
import trio.testing

from subagent import Event, Spec, Stream, SubagentTool, TaskError, open_pool
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
