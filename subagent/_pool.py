"""The Pool: bounded concurrency and queueing of subagent tasks on the caller's nursery."""

from __future__ import annotations

import itertools
import math
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

import agentcore
from agentcore import AgentPath

from ._context import current_task
from ._errors import (
    MaxDepthError,
    PoolClosedError,
    SpecError,
    UnknownAgentError,
    format_path,
)
from ._runner import run_task
from ._spec import Defaults, Spec, delegated
from ._statistics import PoolStatistics
from ._stream import Stream
from ._task import Task, TaskStatus
from ._watchdog import LoopWatchdog, check_threshold
from .mcp._sessions import McpSessions, open_mcp_sessions

if TYPE_CHECKING:
    from agentcore import Tool

    from .mcp import McpServer


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
        mcp: McpSessions | None = None,
    ) -> None:
        self.mcp = mcp
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
        self._accepted = 0
        self._queue: deque[Task] = deque()
        self._reacquiring: deque[Task] = deque()
        self._room = trio.lowlevel.ParkingLot()
        self._live: dict[AgentPath, Task] = {}
        # Ended tasks that were cancelled, by path, for as long as their Task is
        # referenced: a later submit below one is cancelled too, so the outcome does not
        # depend on whether the cancelled task has ended yet (a live one is in _live,
        # marked by its scope). Weak, so that no per-task state outlives a task its
        # caller has dropped: the pool's memory stays flat however many tasks end.
        self._ended_cancels: weakref.WeakValueDictionary[AgentPath, Task] = (
            weakref.WeakValueDictionary()
        )
        self._holding = 0
        self._running = 0
        self._finished = 0
        self._failed = 0
        self._cancelled = 0
        self._closed = False
        self._aborted = False

    def __repr__(self) -> str:
        state = " cancelled" if self._aborted else " closed" if self._closed else ""
        return (
            f"<subagent.Pool agents={sorted(self._specs)} running={self._running} "
            f"queued={len(self._queue)} finished={self._finished} failed={self._failed} "
            f"cancelled={self._cancelled}{state}>"
        )

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

    def mcp_tools(self, server: str, *names: str) -> tuple[Tool, ...]:
        """The tools of MCP server ``server`` (all it listed, or those ``names``), for a
        :class:`Spec`'s ``tools``; not a checkpoint. See :meth:`McpSessions.tools`.

        Raises:
          SpecError: the pool has no server of that name, or it has no such tool.
        """
        if self.mcp is None:
            raise SpecError(f"no MCP server is named {server!r}: the pool has none")
        return self.mcp.tools(server, *names)

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
        while True:
            try:
                task = self._accept(name, input, parent_path, events, call_id, fanout, background)
            except trio.WouldBlock:
                await self._room.park()
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
        if len(parent_path) >= self.max_depth:
            raise MaxDepthError(name, parent_path, self.max_depth)
        if self._aborted:
            raise PoolClosedError("the pool was cancelled: it accepts no new tasks")
        parent = self._live.get(parent_path) if parent_path else None
        if self._closed and not self._inside(parent):
            raise PoolClosedError("the pool is closed: it accepts no new tasks")
        if len(self._queue) >= self.max_queued:
            raise trio.WouldBlock
        if events is None:
            events = parent.events if parent is not None else self.events
        # A task started from within a run is bounded by that run's gate too.
        spec = delegated(spec, agentcore.current_run())
        path = (*parent_path, f"{name}/{next(self._numbers):04d}")
        task = Task(path, name, input, spec, self, parent, events, call_id)
        self._accepted += 1
        self._live[path] = task
        self._queue.append(task)
        if parent is not None:
            parent.children.append(task)
            if background:
                task._deliver_to = parent
                parent._background.add(task)
        task._fanout_slot = fanout
        self._nursery.start_soon(run_task, task, name=f"subagent {format_path(path)}")
        self._pump()
        if self._under_a_cancel(parent, parent_path):
            task.cancel()
        return task

    def _under_a_cancel(self, parent: Task | None, parent_path: AgentPath) -> bool:
        # Below a task whose cancel was called, live or already ended (while its Task
        # is referenced): the outcome must not depend on whether it has resolved yet.
        if parent is not None and parent._scope.cancel_called:
            return True
        live = self._live
        ended = self._ended_cancels
        for depth in range(1, len(parent_path) + 1):
            prefix = parent_path[:depth]
            task = live.get(prefix)
            if task is None:
                task = ended.get(prefix)
            if task is not None and task._scope.cancel_called:
                return True
        return False

    def _inside(self, parent: Task | None) -> bool:
        # Accepted work may still delegate after close(): the caller is a running
        # task of this pool submitting under its own path.
        caller = current_task.get()
        return caller is not None and caller is parent and caller.status is TaskStatus.running

    # -- slots ----------------------------------------------------------------------

    def _pump(self) -> None:
        # Hand free slots out: parents coming back from a subagent first (they finish
        # accepted work), then queued tasks in submit order.
        while self._holding < self.max_concurrent:
            if self._reacquiring:
                task = self._reacquiring.popleft()
            elif self._queue:
                task = self._queue.popleft()
                task.status = TaskStatus.running
                self._running += 1
                self._room.unpark()
            else:
                return
            self._holding += 1
            task._holds_slot = True
            task._granted.set()

    def _release_slot(self, task: Task) -> None:
        if task._holds_slot:
            task._holds_slot = False
            self._holding -= 1
            self._pump()

    def _end_slot(self, task: Task) -> None:
        # A task's run ended. If its parent is waiting for it alone, the slot goes
        # straight back to the parent (accepted work finishes before queued work).
        parent = task.parent
        if (
            task._holds_slot
            and parent is not None
            and parent._awaiting is task
            and parent._delegating == 1
            and not parent._holds_slot
            and not parent._scope.cancel_called
        ):
            task._holds_slot = False
            parent._holds_slot = True
            return
        self._release_slot(task)

    async def _reacquire_slot(self, task: Task) -> None:
        # A parent whose subagent ended takes a slot back before its run goes on.
        await trio.lowlevel.checkpoint_if_cancelled()
        if task._holds_slot:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        task._granted = trio.Event()
        self._reacquiring.append(task)
        self._pump()
        try:
            await task._granted.wait()
        except BaseException:
            if not task._granted.is_set():
                self._reacquiring.remove(task)
            raise

    # -- ends -------------------------------------------------------------------------

    def _cancel_one(self, task: Task) -> None:
        task._scope.cancel()
        if task._reclaim is not None:
            task._reclaim.cancel()
        if task.status is TaskStatus.queued:
            self._queue.remove(task)
            self._room.unpark()
            task.status = TaskStatus.cancelled
            self._cancelled += 1

    def _count_end(self, task: Task, status: TaskStatus) -> None:
        # Called once per task, when its runner ends (a cancel may have counted it already).
        if task.status is TaskStatus.queued:
            self._cancel_one(task)
        elif task.status is TaskStatus.running:
            self._running -= 1
            task.status = status
            if status is TaskStatus.finished:
                self._finished += 1
            elif status is TaskStatus.cancelled:
                self._cancelled += 1
            else:
                self._failed += 1

    def _forget(self, task: Task) -> None:
        # The task resolves: the pool keeps nothing of it but, while its Task is
        # referenced, the mark of a cancel (see _under_a_cancel).
        del self._live[task.path]
        if task._scope.cancel_called:
            self._ended_cancels[task.path] = task

    def _mark_cancelled(self, task: Task) -> None:
        # Task.cancel() reached a task that has resolved already.
        if task.done:
            self._ended_cancels[task.path] = task

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Stop accepting tasks from outside; sync and idempotent.

        Queued and running tasks still finish, and they may still delegate.
        Submits waiting on a full queue raise :class:`PoolClosedError`.
        """
        self._closed = True
        self._room.unpark_all()

    def cancel(self) -> None:
        """Close the pool and cancel every task; sync and idempotent.

        Queued tasks resolve as cancelled without running.
        """
        self.close()
        self._aborted = True
        for task in list(self._live.values()):
            self._cancel_one(task)

    def statistics(self) -> PoolStatistics:
        """A snapshot of the pool's counts and limits; not a checkpoint."""
        return PoolStatistics(
            running=self._running,
            queued=len(self._queue),
            finished=self._finished,
            failed=self._failed,
            cancelled=self._cancelled,
            accepted=self._accepted,
            holding_slots=self._holding,
            waiting_submitters=len(self._room),
            max_concurrent=self.max_concurrent,
            max_queued=self.max_queued,
            max_depth=self.max_depth,
            closed=self._closed,
        )


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
    mcp: Iterable[McpServer] = (),
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
      mcp: MCP servers whose tools specs may name (:class:`subagent.mcp.McpServer`):
        started at once when the block opens (it waits for each at most its
        ``start_timeout``), shared by every run, closed (and reaped) when it ends.
    """
    _at_least_one("max_concurrent", max_concurrent)
    _at_least_one("max_queued", max_queued)
    _at_least_one("max_depth", max_depth)
    _at_least_one("max_children", max_children)
    if not (children_timeout > 0 and not math.isnan(children_timeout)):
        raise ValueError(f"open_pool children_timeout must be positive, not {children_timeout!r}")
    check_threshold(loop_watchdog)
    async with open_mcp_sessions(mcp, events) as sessions:
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
                    mcp=sessions,
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
