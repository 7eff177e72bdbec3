"""Who cancelled a task: the ``cause`` of its ``task_cancelled`` ledger entry (issue
33), one of the closed set ``subagent._core._node.CancelCause``, for each way a task
is cancelled; and the ``abort`` entry of its run says it in words of ours
(``CANCEL_TEXTS``), not trio's "Cancelled: cancelled due to explicit"."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from agentcore import Usage
from agentcore.testing import Blocked, ScriptedModel, tool_call_reply
from ledger import MemorySink
from subagent import Budget, Defaults, Spec, SubagentTool, TaskCancelled, TaskTimeout, open_pool

Clock = trio.testing.MockClock

#: The data of a running task's task_cancelled entry, but its cause.
RAN = {"agent": "a", "end_reason": "aborted"}


def _cancelled(audit: MemorySink) -> list[tuple[str, dict[str, Any], str | None]]:
    # Each task_cancelled entry: its run id, its data and its error.
    return [
        (e.run_id, dict(e.data), e.error) for e in audit.entries if e.kind == "task_cancelled"
    ]


def _aborts(audit: MemorySink) -> list[tuple[str, str | None]]:
    # Each abort entry: its run id and its error (the text naming who cancelled).
    return [(e.run_id, e.error) for e in audit.entries if e.kind == "abort"]


def _parked() -> ScriptedModel:
    return ScriptedModel([Blocked("never")] * 4)


async def test_the_callers_cancel_names_the_caller_for_the_task_and_below() -> None:
    audit = MemorySink()
    async with open_pool(defaults=Defaults(audit=audit)) as pool:
        pool.register(Spec("c", model=_parked()))
        pool.register(Spec("a", model=ScriptedModel(
            [tool_call_reply("subagent", '{"agent": "c", "task": "t"}')]
        ), tools=[SubagentTool(pool)]))
        task = await pool.submit("a", "go")
        await trio.testing.wait_all_tasks_blocked()
        task.cancel()
        with pytest.raises(TaskCancelled):
            await task.wait()
    assert _cancelled(audit) == [
        ("a/0001/c/0002", {"agent": "c", "end_reason": "aborted", "cause": "caller"}, None),
        ("a/0001", {**RAN, "cause": "caller"}, None),
    ]
    caller = "cancelled (caller): Task.cancel() of it or of a task above it"
    assert _aborts(audit) == [("a/0001/c/0002", caller), ("a/0001", caller)]


async def test_a_parents_timeout_names_timeout(autojump_clock: Clock) -> None:
    audit = MemorySink()
    async with open_pool(defaults=Defaults(audit=audit)) as pool:
        pool.register(Spec("c", model=_parked()))
        pool.register(Spec("a", model=ScriptedModel(
            [tool_call_reply("subagent", '{"agent": "c", "task": "t"}')]
        ), tools=[SubagentTool(pool)], timeout=20))
        parent = await pool.submit("a", "go")
        with pytest.raises(TaskTimeout):
            await parent.wait()
    assert _cancelled(audit) == [
        ("a/0001/c/0002", {"agent": "c", "end_reason": "aborted", "cause": "timeout"}, None),
    ]
    assert _aborts(audit) == [
        ("a/0001/c/0002", "cancelled (timeout): a time limit above it passed"),
        ("a/0001", "Cancelled: cancelled due to deadline"),
    ]
    # The parent itself timed out (not cancelled): its end says so as it did.
    [end] = [e for e in audit.entries if e.kind == "task_finished"]
    assert (end.run_id, dict(end.data), end.error) == (
        "a/0001", {"agent": "a", "end_reason": "timeout"}, "timed out after 20s"
    )


async def test_a_parent_that_ends_names_parent_ended() -> None:
    # A background child that is not critical is cancelled when its parent's run ends.
    audit = MemorySink()
    async with open_pool(defaults=Defaults(audit=audit)) as pool:
        pool.register(Spec("c", model=_parked()))
        model = ScriptedModel([
            tool_call_reply("subagent", '{"agent": "c", "task": "t", "wait": false}'),
            Blocked("done"),
        ])
        pool.register(Spec("a", model=model, tools=[SubagentTool(pool)]))
        parent = await pool.submit("a", "go")
        await trio.testing.wait_all_tasks_blocked()  # the child runs, parked
        model.release()
        assert (await parent.wait()).output == "done"
    assert _cancelled(audit) == [
        ("a/0001/c/0002", {"agent": "c", "end_reason": "aborted", "cause": "parent_ended"}, None),
    ]
    assert _aborts(audit) == [("a/0001/c/0002", "cancelled (parent_ended): its parent's run "
                                                "ended or stopped waiting for it")]


async def test_the_pool_closing_names_pool_closed() -> None:
    # Pool.cancel(): a running task and a queued one.
    audit = MemorySink()
    async with open_pool(max_concurrent=1, defaults=Defaults(audit=audit)) as pool:
        pool.register(Spec("a", model=_parked()))
        tasks = [await pool.submit("a", "go") for _ in range(2)]
        await trio.testing.wait_all_tasks_blocked()
        pool.cancel()
        for task in tasks:
            with pytest.raises(TaskCancelled):
                await task.wait()
    assert sorted(_cancelled(audit)) == [
        ("a/0001", {**RAN, "cause": "pool_closed"}, None),
        ("a/0002", {"agent": "a", "cause": "pool_closed"}, None),
    ]
    # The queued task never ran: no abort entry.
    assert _aborts(audit) == [("a/0001", "cancelled (pool_closed): the pool was cancelled")]


async def test_a_failing_block_of_open_pool_names_pool_closed() -> None:
    audit = MemorySink()
    with pytest.raises(ValueError, match=r"^boom$"):
        async with open_pool(defaults=Defaults(audit=audit)) as pool:
            pool.register(Spec("a", model=_parked()))
            await pool.submit("a", "go")
            await trio.testing.wait_all_tasks_blocked()
            raise ValueError("boom")
    assert _cancelled(audit) == [("a/0001", {**RAN, "cause": "pool_closed"}, None)]
    assert _aborts(audit) == [("a/0001", "cancelled (pool_closed): the pool was cancelled")]


async def test_a_cancel_from_outside_the_pool_names_pool_closed() -> None:
    # The scope around open_pool is cancelled: the run's Cancelled comes from outside
    # the pool (no cancel of the pool's named it when the run saw it, or one did).
    audit = MemorySink()
    with trio.CancelScope() as outside:
        async with open_pool(defaults=Defaults(audit=audit)) as pool:
            pool.register(Spec("a", model=_parked()))
            await pool.submit("a", "go")
            await trio.testing.wait_all_tasks_blocked()
            outside.cancel()
            await trio.sleep_forever()
    assert _cancelled(audit) == [("a/0001", {**RAN, "cause": "pool_closed"}, None)]
    assert _aborts(audit) == [("a/0001", "cancelled (pool_closed): the pool was cancelled")]


async def test_ctrl_c_out_of_open_pool_names_interrupt() -> None:
    # What Ctrl-C (and SIGTERM, through the CLI) raises in the block of open_pool.
    audit = MemorySink()
    with pytest.raises(KeyboardInterrupt):
        async with open_pool(defaults=Defaults(audit=audit)) as pool:
            pool.register(Spec("a", model=_parked()))
            await pool.submit("a", "go")
            await trio.testing.wait_all_tasks_blocked()
            raise KeyboardInterrupt
    assert _cancelled(audit) == [("a/0001", {**RAN, "cause": "interrupt"}, None)]
    assert _aborts(audit) == [("a/0001", "cancelled (interrupt): Ctrl-C or SIGTERM")]


async def test_a_spent_budget_names_budget() -> None:
    # The pool's budget is spent by the first task's model call while the second
    # waits in the queue: the queued one is cancelled by the budget.
    audit = MemorySink()
    model = ScriptedModel(["one", "two"], usage=Usage(input_tokens=5, output_tokens=5))
    async with open_pool(max_concurrent=1, budget=Budget(tokens=1),
                         defaults=Defaults(audit=audit)) as pool:
        pool.register(Spec("a", model=model))
        await pool.submit("a", "go")
        queued = await pool.submit("a", "go")
        with pytest.raises(TaskCancelled):
            await queued.wait()
    assert _cancelled(audit) == [("a/0002", {"agent": "a", "cause": "budget"}, None)]


async def test_the_first_cancel_keeps_its_cause() -> None:
    # A task the caller cancelled, then the pool: still the caller's.
    audit = MemorySink()
    async with open_pool(defaults=Defaults(audit=audit)) as pool:
        pool.register(Spec("a", model=_parked()))
        task = await pool.submit("a", "go")
        await trio.testing.wait_all_tasks_blocked()
        task.cancel()
        pool.cancel()
        with pytest.raises(TaskCancelled):
            await task.wait()
    assert _cancelled(audit) == [("a/0001", {**RAN, "cause": "caller"}, None)]
    assert _aborts(audit) == [
        ("a/0001", "cancelled (caller): Task.cancel() of it or of a task above it")]
