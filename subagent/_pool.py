"""The Pool: bounded concurrency and queueing of subagent tasks on the caller's nursery."""

from __future__ import annotations

import itertools
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

import agentcore
from agentcore import AgentPath

from ._context import current_task
from ._core import (
    CancelRun,
    Effect,
    Grant,
    PoolCore,
    QueueFull,
    StartRunner,
    TaskStatus,
    WakeSubmitter,
)
from ._errors import SpecError, UnknownAgentError, format_path
from ._runner import end_task, run_task
from ._spec import Defaults, Spec, delegated
from ._statistics import PoolStatistics
from ._stream import Stream
from ._task import Task
from ._tool import take_back
from ._watchdog import LoopWatchdog, check_threshold


def _at_least_one(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"open_pool {name} must be at least 1, not {value!r}")


class Pool:
    """Runs subagent tasks: at most ``max_concurrent`` at once, at most ``max_queued`` waiting.

    Create it with :func:`open_pool`; every task runs in that block's nursery.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        max_concurrent: int,
        max_queued: int,
        max_depth: int,
        defaults: Defaults,
        events: Stream | None,
        max_children: int,
        children_timeout: float,
    ) -> None:
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self.max_depth = max_depth
        self.defaults = defaults
        self.events = events
        self.max_children = max_children
        self.children_timeout = children_timeout
        self._nursery = nursery
        self._specs: dict[str, Spec] = {}
        self._numbers = itertools.count(1)
        # The rules and the state of slots, queue and task tree; this class only
        # carries out the effects its methods return (see _apply).
        self._core: PoolCore[Task] = PoolCore(max_concurrent, max_queued, max_depth)
        # Runs parked taking their slot back (see _take_back), by task.
        self._parked: dict[Task, trio.lowlevel.Task] = {}

    def __repr__(self) -> str:
        core = self._core
        state = " cancelled" if core.aborted else " closed" if core.closed else ""
        return (
            f"<subagent.Pool agents={sorted(self._specs)} running={core.running} "
            f"queued={len(core.queue)} finished={core.finished} failed={core.failed} "
            f"cancelled={core.cancelled}{state}>"
        )

    @property
    def _live(self) -> dict[AgentPath, Task]:
        # The tasks accepted and not resolved, by path (a copy).
        return {path: node.handle for path, node in self._core.live.items()}

    # -- registry ----------------------------------------------------------------

    @property
    def specs(self) -> dict[str, Spec]:
        """The registered specs by name, after inheritance (a copy)."""
        return dict(self._specs)

    def register(self, spec: Spec) -> None:
        """Add ``spec`` (or replace the one of the same name); not a checkpoint.

        Its unset fields inherit the pool's defaults now.

        Raises:
          SpecError: it has no model after inheritance, or a bad name or limit.
        """
        from agentcore import Agent, ConfigurationError

        resolved = spec.inherit(self.defaults)
        assert resolved.model is not None
        try:
            Agent(model=resolved.model, tools=resolved.tools)
        except ConfigurationError as exc:
            raise SpecError(f"spec {spec.name!r}: {exc}") from exc
        self._specs[spec.name] = resolved

    # -- submitting ----------------------------------------------------------------

    async def submit(
        self,
        name: str,
        input: str,
        *,
        parent_path: AgentPath = (),
        events: Stream | None = None,
    ) -> Task:
        """Queue a run of agent ``name`` on ``input`` and return its Task. A checkpoint.

        It waits only while the queue is full. Cancelling it while it waits
        leaves no trace in the pool.

        Args:
          name: A registered spec's name.
          input: The task text, given to the run verbatim as its user message.
          parent_path: The AgentPath the task runs under (its path extends it).
          events: Where the run's events go; by default the parent task's
            stream, else the pool's.

        Raises:
          UnknownAgentError: no spec has that name.
          MaxDepthError: ``len(parent_path) >= max_depth``.
          PoolClosedError: the pool is closed, or closes while this waits.
        """
        return await self._submit(name, input, tuple(parent_path), events, None)

    async def _submit(
        self,
        name: str,
        input: str,
        parent_path: AgentPath,
        events: Stream | None,
        call_id: str | None,
        fanout: trio.Semaphore | None = None,
        background: bool = False,
    ) -> Task:
        await trio.lowlevel.checkpoint_if_cancelled()
        core = self._core
        while True:
            try:
                task = self._accept(name, input, parent_path, events, call_id, fanout, background)
            except trio.WouldBlock:
                # Park until the core wakes this submit; a cancel withdraws it.
                token = trio.lowlevel.current_task()
                core.park_submitter(token)

                def abort(_: object) -> trio.lowlevel.Abort:
                    core.withdraw_submitter(token)  # noqa: B023 (called before the next loop)
                    return trio.lowlevel.Abort.SUCCEEDED

                await trio.lowlevel.wait_task_rescheduled(abort)
            else:
                await trio.lowlevel.cancel_shielded_checkpoint()
                return task

    def submit_nowait(
        self,
        name: str,
        input: str,
        *,
        parent_path: AgentPath = (),
        events: Stream | None = None,
    ) -> Task:
        """Like :meth:`submit`, but raise ``trio.WouldBlock`` if the queue is full.

        Not a checkpoint.
        """
        return self._accept(name, input, tuple(parent_path), events, None)

    def _accept(
        self,
        name: str,
        input: str,
        parent_path: AgentPath,
        events: Stream | None,
        call_id: str | None,
        fanout: trio.Semaphore | None = None,
        background: bool = False,
    ) -> Task:
        # ``fanout``: the parent's max_children slot the task holds until it ends;
        # ``background``: deliver its result into the parent run (see _background.py).
        spec = self._specs.get(name)
        if spec is None:
            raise UnknownAgentError(name, tuple(sorted(self._specs)))
        caller = current_task.get()
        core = self._core
        try:
            parent_node = core.admit(
                name, parent_path, caller._node if caller is not None else None
            )
        except QueueFull:
            raise trio.WouldBlock from None
        parent = parent_node.handle if parent_node is not None else None
        if events is None:
            events = parent.events if parent is not None else self.events
        # A task started from within a run is bounded by that run's gate too.
        spec = delegated(spec, agentcore.current_run())
        path = (*parent_path, f"{name}/{next(self._numbers):04d}")
        task = Task(path, name, input, spec, self, parent, events, call_id, core, self._apply)
        if parent is not None and background:
            task._deliver_to = parent
            parent._background.add(task)
        task._fanout_slot = fanout
        self._apply(core.accept(task._node))
        return task

    # -- the shell: carrying out the core's effects -----------------------------------

    def _apply(self, effects: list[Effect[Task]]) -> None:
        # The one place that starts runners, wakes parked tasks and sets events.
        for effect in effects:
            if isinstance(effect, Grant):
                task = effect.node.handle
                waiter = self._parked.pop(task, None)
                if waiter is not None:
                    trio.lowlevel.reschedule(waiter)
                else:
                    task._granted.set()
            elif isinstance(effect, WakeSubmitter):
                trio.lowlevel.reschedule(effect.token)  # type: ignore[arg-type]
            elif isinstance(effect, StartRunner):
                task = effect.node.handle
                self._nursery.start_soon(
                    self._run_task, task, name=f"subagent {format_path(task.path)}"
                )
            elif isinstance(effect, CancelRun):
                task = effect.node.handle
                task._scope.cancel()
                if task._reclaim is not None:
                    task._reclaim.cancel()
            else:
                effect.node.handle._done.set()

    async def _run_task(self, task: Task) -> None:
        # A task from queued to resolved, in the pool's nursery (see subagent._lifecycle).
        status = TaskStatus.cancelled
        try:
            status = await run_task(task)
        finally:
            self._apply(self._core.run_ended(task._node, status))
            await end_task(task, status)
            self._apply(self._core.resolve(task._node))

    # -- lending a slot (for the delegation tools) ----------------------------------

    def _lend(self, task: Task) -> None:
        # A call of the task's run blocks: the first such call lends its slot.
        self._apply(self._core.lend(task._node))

    async def _give_back(self, task: Task) -> None:
        # A lending call ended: the last one takes the slot back (see lend_slot).
        if self._core.lend_ended(task._node):
            await take_back(task, self._take_back)

    def _await_child(self, task: Task, child: Task) -> None:
        # The task's lending call waits for ``child`` alone (see PoolCore.run_ended).
        self._core.await_child(task._node, child._node)

    def _stop_awaiting(self, task: Task, child: Task) -> None:
        self._core.stop_awaiting(task._node, child._node)

    async def _take_back(self, task: Task) -> None:
        # Like trio's CapacityLimiter.acquire_on_behalf_of: try at once, else park
        # with an abort function that withdraws from the core's line. A checkpoint.
        await trio.lowlevel.checkpoint_if_cancelled()
        core = self._core
        node = task._node
        granted, effects = core.take_back(node)
        self._apply(effects)
        if granted:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        self._parked[task] = trio.lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:
            del self._parked[task]
            core.withdraw(node)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Stop accepting tasks from outside; sync and idempotent.

        Queued and running tasks still finish, and they may still delegate.
        Submits waiting on a full queue raise :class:`PoolClosedError`.
        """
        self._apply(self._core.close())

    def cancel(self) -> None:
        """Close the pool and cancel every task; sync and idempotent.

        Queued tasks resolve as cancelled without running.
        """
        self._apply(self._core.abort())

    def statistics(self) -> PoolStatistics:
        """A snapshot of the pool's counts and limits; not a checkpoint."""
        return self._core.statistics()


@asynccontextmanager
async def open_pool(
    *,
    max_concurrent: int = 8,
    max_queued: int = 1024,
    max_depth: int = 8,
    defaults: Defaults | None = None,
    events: Stream | None = None,
    max_children: int = 5,
    children_timeout: float = 30.0,
    loop_watchdog: float | None = None,
) -> AsyncIterator[Pool]:
    """Open a :class:`Pool` whose tasks run in a nursery inside this block.

    Leaving the block normally closes the pool and waits for every task;
    leaving it by an exception cancels every task first. Nothing the pool
    starts outlives the block.

    Args:
      max_concurrent: Runs executing at once (a run waiting for its own
        subagent does not count).
      max_queued: Tasks accepted and waiting to start.
      max_depth: The longest AgentPath (1: no delegation).
      defaults: What specs inherit (model, gate, audit sink, agent id).
      events: Where events of tasks with no other destination go; the pool never closes it.
      max_children: Live subagents one run may have, unless its spec says otherwise.
      children_timeout: Seconds a run waits for a child slot before the delegation fails.
      loop_watchdog: Wall-clock seconds the trio thread may go without reaching a
        checkpoint (an async tool blocking the loop); ``None`` (default): unwatched.
        A stall is logged on the ``subagent`` logger (running tool, stack) when seen,
        and sent to ``events`` as one ``event_loop_blocked`` event once the loop runs
        again (see :class:`subagent.LoopStall`). The thread stops with the block.
    """
    _at_least_one("max_concurrent", max_concurrent)
    _at_least_one("max_queued", max_queued)
    _at_least_one("max_depth", max_depth)
    _at_least_one("max_children", max_children)
    if not (children_timeout > 0 and not math.isnan(children_timeout)):
        raise ValueError(f"open_pool children_timeout must be positive, not {children_timeout!r}")
    check_threshold(loop_watchdog)
    body_error: BaseException | None = None
    watchdog: LoopWatchdog | None = None
    try:
        async with trio.open_nursery() as nursery:
            pool = Pool(
                nursery,
                max_concurrent=max_concurrent,
                max_queued=max_queued,
                max_depth=max_depth,
                defaults=defaults if defaults is not None else Defaults(),
                events=events,
                max_children=max_children,
                children_timeout=children_timeout,
            )
            if loop_watchdog is not None:
                watchdog = LoopWatchdog(loop_watchdog, pool)
                watchdog.start(nursery)
            try:
                yield pool
            except BaseException as exc:
                body_error = exc
                pool.cancel()
                raise
            finally:
                pool.close()
    except BaseExceptionGroup as group:
        # The pool's own tasks never raise, so a group holding only the body's
        # exception is that exception: give it back to the caller unwrapped
        # (raised below, outside this handler, so its own cause and context stay).
        if body_error is None or group.exceptions != (body_error,):
            raise
    else:
        return
    finally:
        if watchdog is not None:
            watchdog.stop()
    raise body_error
