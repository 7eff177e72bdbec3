"""The waits a run makes on its pool: lending its concurrency slot while it waits for
subagents, taking the slot back, and claiming one of its fan-out slots
(``max_children``) to delegate.

Each follows trio's ``CapacityLimiter.acquire_on_behalf_of``: try the core's
synchronous step, else park with an abort function that withdraws from the core. The
delegation tools (subagent._delegation._tool) call these and the core's fan-out steps;
every one of them is a checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

import trio

from .._errors import MaxChildrenError, format_path

if TYPE_CHECKING:
    from .._core._core import Effect, PoolCore
    from ._task import Task

_T = TypeVar("_T")


class Pool(Protocol):
    """What these waits use of :class:`subagent._pool._pool.Pool` (its core, its
    effects' shell, its parked runs, its ``children_timeout``)."""

    _core: PoolCore[Task]
    _parked: dict[Task, trio.lowlevel.Task]
    children_timeout: float

    def _apply(self, effects: list[Effect[Task]]) -> None: ...


def run_ending(task: Task) -> bool:
    """Whether ``task``'s run is being ended from outside a tool call: the task was
    cancelled, its run aborted, or its ``timeout`` or ``idle_timeout`` passed."""
    run = task._run
    return (
        # The task's scope is cancelled by a cancel and by its limits' deadline.
        task._scope.cancel_called
        or (run is not None and run.abort_requested)
    )


async def lend_slot(pool: Pool, task: Task, fn: Callable[[], Awaitable[_T]]) -> _T:
    """Await ``fn()`` while ``task`` lends its slot to ``pool``; see
    subagent._delegation._tool.lend_slot. A checkpoint."""
    core = pool._core
    pool._apply(core.lend(task._node))
    try:
        return await fn()
    finally:
        if core.lend_ended(task._node):
            await take_back(pool, task)


async def take_back(pool: Pool, task: Task) -> None:
    """Give ``task`` its slot back after it lent it. A checkpoint.

    If the wait is cancelled, or the call was cancelled already, it depends on who
    cancelled. A run being ended from outside (:func:`run_ending`) runs only its
    shielded, bounded end sequence from here, which needs no slot: it does not wait
    (a task cancel must not wait for a slot). Otherwise the cancel came from a scope
    inside the run (a tool_timeout), which goes on after it: the slot is taken back
    shielded first. That wait is as long as any run's return from a subagent
    (returning runs get free slots before queued tasks) and it stops, leaving the task
    without a slot, as soon as the run is being ended from outside: a task cancel
    cancels it (the core's CancelRun effect), and it wakes at the run's timeout and
    idle_timeout (an agentcore.Run.abort meanwhile is seen at the next wake or grant).
    """
    try:
        await _reacquire(pool, task)
    except trio.Cancelled:
        with trio.CancelScope(shield=True):
            while not task._node.holds_slot and not run_ending(task):
                limits = task._limits
                deadline = limits.deadline if limits is not None else math.inf
                try:
                    with task._reclaiming(deadline):
                        await _reacquire(pool, task)
                finally:
                    task._reclaimed()
        raise


async def _reacquire(pool: Pool, task: Task) -> None:
    # Like trio's CapacityLimiter.acquire_on_behalf_of: try at once, else park
    # with an abort function that withdraws from the core's line. A checkpoint.
    await trio.lowlevel.checkpoint_if_cancelled()
    core = pool._core
    node = task._node
    granted, effects = core.take_back(node)
    pool._apply(effects)
    if granted:
        await trio.lowlevel.cancel_shielded_checkpoint()
        return
    parked = pool._parked
    parked[task] = trio.lowlevel.current_task()

    def abort(_: object) -> trio.lowlevel.Abort:
        del parked[task]
        core.withdraw(node)
        return trio.lowlevel.Abort.SUCCEEDED

    await trio.lowlevel.wait_task_rescheduled(abort)


async def claim_child(pool: Pool, parent: Task, agent: str, lend: bool) -> bool:
    """Claim one of ``parent``'s fan-out slots, waiting at most the pool's
    ``children_timeout`` (lending ``parent``'s slot meanwhile if ``lend``); False if
    ``parent`` resolved meanwhile (no claim needed). A checkpoint.

    Raises:
      MaxChildrenError: none was freed in time.
    """
    core = pool._core
    node = parent._node
    got = False

    async def claim() -> None:
        nonlocal got
        got = await _wait_fanout(pool, parent)

    try:
        with trio.move_on_after(pool.children_timeout):
            if lend:
                await lend_slot(pool, parent, claim)
            else:
                await claim()
            return got
    except BaseException:
        if got:
            pool._apply(core.release_fanout(node))
        raise
    if got:
        # Freed just as the time ran out (or the slot's take-back was cancelled).
        return True
    raise MaxChildrenError(
        f"cannot start agent {agent!r}: run {format_path(parent.path)} has reached its "
        f"limit of {node.fanout_limit} live subagents (max_children) and none ended "
        f"within {pool.children_timeout:g}s; wait for results or work without delegating"
    )


async def _wait_fanout(pool: Pool, parent: Task) -> bool:
    # Like trio's Semaphore.acquire on the core's fan-out of ``parent``: try at
    # once, else park with an abort function that withdraws the claim. A checkpoint.
    await trio.lowlevel.checkpoint_if_cancelled()
    core = pool._core
    node = parent._node
    if node.resolved:
        await trio.lowlevel.cancel_shielded_checkpoint()
        return False
    if core.claim_fanout(node):
        await trio.lowlevel.cancel_shielded_checkpoint()
        return True
    token = trio.lowlevel.current_task()
    core.park_fanout(node, token)

    def abort(_: object) -> trio.lowlevel.Abort:
        core.withdraw_fanout(node, token)
        return trio.lowlevel.Abort.SUCCEEDED

    await trio.lowlevel.wait_task_rescheduled(abort)
    return True
