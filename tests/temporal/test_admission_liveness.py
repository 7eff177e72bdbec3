"""The admission workflow on the real dev server: idempotent tickets, an early release,
closed roots reclaimed (terminated, timed out), and continue-as-new with roots holding
and waiting on both sides of the boundary."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import TimeoutError as WorkflowTimeoutError
from temporalio.worker import UnsandboxedWorkflowRunner
from temporalio.worker import Worker as TemporalWorker

from subagent.temporal import (
    DevServer,
    RootResult,
    RunOptions,
    Worker,
    admission_id,
    admission_state,
    ensure_admission,
    start,
)
from subagent.temporal._admission import AdmissionInput
from subagent.temporal._admission_books import AdmissionAnswer, Ticket

from .test_admission import DEADLINE, Work, slow_specs, until

GRANT = "granted"


@workflow.defn(name="AdmissionGhost")
class Ghost:
    """A stand-in root: it only records the admission answers it is sent."""

    def __init__(self) -> None:
        self.answers: list[AdmissionAnswer] = []

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.signal(name="admission")
    def admission(self, answer: AdmissionAnswer) -> None:
        self.answers.append(answer)

    @workflow.query(name="answers")
    def got(self) -> list[AdmissionAnswer]:
        return list(self.answers)


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``check`` (a real server: no virtual clock) until it holds, or fail."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while not await check():
        if loop.time() > end:
            raise AssertionError(f"not reached within {DEADLINE} s")
        await asyncio.sleep(0.05)


async def by_hand(server: DevServer) -> None:
    client = await Client.connect(server.address)
    await ensure_admission(client, "hand", task_queue="hand", limit=1, reclaim_every=0.5)
    admission = client.get_workflow_handle(admission_id("hand"))
    async with (
        Worker(client, "hand", specs=slow_specs(Work())),
        TemporalWorker(client, task_queue="hand-ghosts", workflows=[Ghost],
                       workflow_runner=UnsandboxedWorkflowRunner()),
    ):
        one = await client.start_workflow(Ghost.run, id="ghost-1", task_queue="hand-ghosts")
        chain = one.result_run_id or ""

        async def answers(handle: WorkflowHandle[Any, Any],
                          expected: list[AdmissionAnswer]) -> None:
            async def check() -> bool:
                return bool(await handle.query(Ghost.got) == expected)
            await eventually(check)

        # The release overtakes its acquire: the late acquire is ignored (no leak).
        await admission.signal("release", Ticket("ghost-1", chain, 0))
        await admission.signal("acquire", Ticket("ghost-1", chain, 0))
        # The next ticket is granted, and a repeat of it holds the same one slot.
        await admission.signal("acquire", Ticket("ghost-1", chain, 1))
        await admission.signal("acquire", Ticket("ghost-1", chain, 1))
        await answers(one, [AdmissionAnswer(1, GRANT), AdmissionAnswer(1, GRANT)])
        assert (await admission_state(client, "hand")).holders == ["ghost-1"]
        # Releases that are not the holder's own free nothing.
        await admission.signal("release", Ticket("ghost-1", "another-chain", 1))
        await admission.signal("release", Ticket("ghost-2", "its-chain", 1))
        await admission.signal("release", Ticket("ghost-1", chain, 0))
        two = await client.start_workflow(Ghost.run, id="ghost-2", task_queue="hand-ghosts")
        await admission.signal("acquire", Ticket("ghost-2", two.result_run_id or "", 0))
        await until(client, "hand", lambda s: s.waiting == ["ghost-2"])
        assert (await admission_state(client, "hand")).holders == ["ghost-1"]
        # The holder is terminated: the liveness check frees its slot for the next.
        await one.terminate("gone")
        await until(client, "hand", lambda s: s.holders == ["ghost-2"])
        await answers(two, [AdmissionAnswer(0, GRANT)])
        await two.terminate("gone")
        await until(client, "hand", lambda s: s.holders == [] and s.reclaimed == 2)
        assert await one.query(Ghost.got) == [AdmissionAnswer(1, GRANT)] * 2


@pytest.mark.slow
def test_tickets_are_idempotent_and_an_early_release_leaks_nothing(
    dev_server: DevServer,
) -> None:
    asyncio.run(by_hand(dev_server))


async def closed_roots(server: DevServer, work: Work) -> tuple[str, RootResult]:
    client = await Client.connect(server.address)
    await ensure_admission(client, "closed", task_queue="closed", limit=1, reclaim_every=0.5)
    options = RunOptions(admission="closed")
    async with Worker(client, "closed", specs=slow_specs(work)):
        late = await start(client, "slow", "a", task_queue="closed", id="closed-a",
                           options=RunOptions(admission="closed", timeout=2.0))
        await until(client, "closed", lambda s: s.holders == ["closed-a"])
        killed = await start(client, "slow", "b", task_queue="closed", id="closed-b",
                             options=options)
        await until(client, "closed", lambda s: s.waiting == ["closed-b"])
        last = await start(client, "slow", "c", task_queue="closed", id="closed-c",
                           options=options)
        await until(client, "closed", lambda s: s.waiting == ["closed-b", "closed-c"])
        # ``a`` times out at its execution timeout: its finally never runs.
        try:
            await asyncio.wait_for(late.result(), DEADLINE)
            raise AssertionError("the root did not time out")
        except WorkflowFailureError as exc:
            cause = type(exc.cause).__name__
        await until(client, "closed", lambda s: s.holders == ["closed-b"])
        assert (await admission_state(client, "closed")).reclaimed == 1
        # ``b`` is terminated while it runs.
        await killed.terminate("stop")
        await until(client, "closed", lambda s: s.holders == ["closed-c"])
        assert (await admission_state(client, "closed")).reclaimed == 2
        work.gate.set()
        result = await asyncio.wait_for(last.result(), DEADLINE)
        await until(client, "closed", lambda s: s.holders == [] and s.waiting == [])
        return cause, result


@pytest.mark.slow
def test_terminated_and_timed_out_roots_are_reclaimed(dev_server: DevServer) -> None:
    work = Work()
    cause, result = asyncio.run(closed_roots(dev_server, work))
    assert cause == WorkflowTimeoutError.__name__
    assert (result.status, result.output) == ("finished", "c: done")


async def across_runs(server: DevServer, work: Work) -> tuple[list[RootResult], AdmissionInput]:
    client, other = [await Client.connect(server.address) for _ in range(2)]
    await ensure_admission(client, "cans", task_queue="cans", limit=2, roots_per_run=3,
                           reclaim_every=0.5)
    admission = client.get_workflow_handle(admission_id("cans"))
    first = (await admission.describe()).run_id
    options = RunOptions(admission="cans")
    async with (
        Worker(client, "cans", specs=slow_specs(work), max_concurrent_roots=4),
        Worker(other, "cans", specs=slow_specs(work), max_concurrent_roots=4),
    ):
        def root(i: int) -> Awaitable[WorkflowHandle[object, RootResult]]:
            return start(client, "slow", f"r{i}", task_queue="cans", id=f"cans-{i}",
                         options=options)
        handles = [await root(0), await root(1)]
        await until(client, "cans", lambda s: len(s.holders) == 2)
        # Three acquires per run: the third makes the first run continue as new with
        # two holders and one or two waiting; the rest arrive, at once, in the next run
        # (which continues as new again after its third).
        handles += await asyncio.gather(*(root(i) for i in range(2, 4)))
        await until(client, "cans", lambda s: len(s.waiting) == 2 and s.runs >= 2)
        handles += await asyncio.gather(*(root(i) for i in range(4, 7)))
        await until(client, "cans", lambda s: len(s.waiting) == 5 and s.runs >= 3)
        assert work.running == 2
        work.gate.set()
        results = [await asyncio.wait_for(h.result(), DEADLINE) for h in handles]
        await until(client, "cans", lambda s: s.holders == [] and s.waiting == [])
        history = await client.get_workflow_handle(admission_id("cans"), run_id=first) \
            .fetch_history()
        ends = [e for e in history.events
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW]
        payloads = ends[0].workflow_execution_continued_as_new_event_attributes.input.payloads
        [carried] = await client.data_converter.decode(payloads, [AdmissionInput])
        return results, carried


@pytest.mark.slow
def test_continue_as_new_keeps_holders_and_waiters(dev_server: DevServer) -> None:
    work = Work()
    results, carried = asyncio.run(across_runs(dev_server, work))
    assert [r.output for r in results] == [f"r{i}: done" for i in range(7)]
    assert (work.most, work.running) == (2, 0)
    assert carried.carried is not None
    assert sorted(t.workflow_id for t in carried.carried.holders) == ["cans-0", "cans-1"]
    assert len(carried.carried.waiting) >= 1
    assert carried.carried.runs == 2


async def long_history(server: DevServer, work: Work) -> tuple[RootResult, int]:
    client = await Client.connect(server.address)
    await ensure_admission(client, "long", task_queue="long", limit=1, history_limit=100,
                           reclaim_every=0.2)
    async with Worker(client, "long", specs=slow_specs(work)):
        held = await start(client, "slow", "h", task_queue="long", id="long-h",
                           options=RunOptions(admission="long"))
        # The liveness checks alone (about ten events each) fill the history: the
        # workflow continues as new while the root holds its slot (the dev server's
        # timers fire about a second apart at the soonest: about ten seconds).
        await until(client, "long", lambda s: s.runs >= 2)
        assert (await admission_state(client, "long")).holders == ["long-h"]
        work.gate.set()
        result = await asyncio.wait_for(held.result(), DEADLINE)
        await until(client, "long", lambda s: s.holders == [])
        return result, (await admission_state(client, "long")).reclaimed


@pytest.mark.slow
def test_a_long_history_continues_as_new_while_a_root_holds(dev_server: DevServer) -> None:
    work = Work()
    result, reclaimed = asyncio.run(long_history(dev_server, work))
    assert (result.output, reclaimed, work.most) == ("h: done", 0, 1)


def test_admission_settings_are_checked(dev_server: DevServer) -> None:
    async def check() -> None:
        client = await Client.connect(dev_server.address)
        bad: list[tuple[dict[str, float], str]] = [
            ({"reclaim_every": 0.0}, "reclaim_every must be above 0, not 0.0"),
            ({"history_limit": 99}, "history_limit must be at least 100, not 99"),
            ({"roots_per_run": 0}, "roots_per_run must be at least 1, not 0"),
            ({"max_queue": -1}, "admission_max_queue must be at least 0, not -1"),
        ]
        for settings, message in bad:
            with pytest.raises(ValueError) as caught:
                await ensure_admission(client, "bad", task_queue="nowhere", limit=1,
                                       **settings)  # type: ignore[arg-type]
            assert str(caught.value) == message

    asyncio.run(check())


async def reset_root(server: DevServer, work: Work) -> tuple[list[RootResult], int, bool]:
    client = await Client.connect(server.address)
    await ensure_admission(client, "reset", task_queue="reset", limit=1, reclaim_every=0.2)
    options = RunOptions(admission="reset")
    async with Worker(client, "reset", specs=slow_specs(work)):
        held = await start(client, "slow", "a", task_queue="reset", id="reset-a",
                           options=options)
        await until(client, "reset", lambda s: s.holders == ["reset-a"])
        await eventually(lambda: asyncio.sleep(0, work.running == 1))
        history = await held.fetch_history()
        first_task = next(e.event_id for e in history.events
                          if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        # Reset to the first workflow task: the old run is terminated, the new run (same
        # chain) asks again with the same ticket and is granted the slot it holds.
        await client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id="reset-a",
                                                 run_id=held.run_id or ""),
            reason="test", workflow_task_finish_event_id=first_task,
            request_id=str(uuid.uuid4())))
        waiting = await start(client, "slow", "b", task_queue="reset", id="reset-b",
                              options=options)
        await until(client, "reset", lambda s: s.waiting == ["reset-b"])
        checks = (await admission_state(client, "reset")).checks
        await until(client, "reset", lambda s: s.checks >= checks + 2)
        state = await admission_state(client, "reset")
        work.gate.set()
        latest = client.get_workflow_handle("reset-a", result_type=RootResult)  # new run
        results = [await asyncio.wait_for(h.result(), DEADLINE) for h in (latest, waiting)]
        await until(client, "reset", lambda s: s.holders == [] and s.waiting == [])
        reset = (await latest.describe()).run_id != held.run_id
        return results, state.reclaimed if state.holders == ["reset-a"] else -1, reset


@pytest.mark.slow
def test_a_reset_root_keeps_its_one_slot(dev_server: DevServer) -> None:
    work = Work()
    results, reclaimed, reset = asyncio.run(reset_root(dev_server, work))
    assert [r.output for r in results] == ["a: done", "b: done"]
    assert (reclaimed, reset) == (0, True)
