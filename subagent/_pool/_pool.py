"""The Pool: bounded concurrency and queueing of subagent tasks on the caller's nursery."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import TYPE_CHECKING

import trio

import agentcore
from agentcore import AgentPath, Message

from .._core._core import (
    Arrived,
    CancelCause,
    CancelRun,
    Effect,
    FanoutFull,
    Grant,
    PoolCore,
    QueueFull,
    Resolve,
    StartRunner,
    WakeFanout,
    WakeSubmitter,
)
from .._core._statistics import PoolStatistics
from .._cost._shell import Budgets
from .._current import current_task
from .._durable._answers import commit_answer
from .._durable._claims import MemoryClaims
from .._durable._recovery import Recovered, StartedRuns, recover, start_committed
from .._durable._resumable import (
    bind,
    claim_and_submit,
    number_past,
    resumed_path,
    run_ids,
    spec_name,
)
from .._durable._store import MAX_RESUME_CLAIMS, CheckpointError, SqliteCheckpoints
from .._errors import SpecError, UnknownAgentError, format_path
from .._specs._history import DEFAULT_LIMITS, HistoryLimits, check_history
from .._specs._spec import Defaults, Spec, delegated
from .._specs._submission import Submission
from .._stream import Stream
from ._scopes import Canceller
from ._task import Task
from ._waits import claim_child, lend_slot

if TYPE_CHECKING:
    from agentcore import Tool

    from .._cost._budget import Budget, Spend
    from .._events import Event
    from ..mcp._sessions import McpSessions

#: What runs a task from queued to resolved in the pool's nursery, telling the core its
#: run's end and its resolution through the task (subagent._pool._lifecycle; open_pool's).
Runner = Callable[[Task], Awaitable[None]]


class Pool:
    """Runs subagent tasks: at most ``max_concurrent`` at once, at most ``max_queued`` waiting.

    Create it with :func:`open_pool`; every task runs in that block's nursery.

    It is the trio shell over a :class:`subagent._core._core.PoolCore`: the core decides,
    this class carries out the effects (:meth:`_apply`) and does every wait.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        runner: Runner,
        *,
        max_concurrent: int,
        max_queued: int,
        max_depth: int,
        defaults: Defaults,
        events: Stream | None,
        max_children: int,
        children_timeout: float,
        mcp: McpSessions | None = None,
        history_limits: HistoryLimits = DEFAULT_LIMITS,
        budget: Budget | None = None,
    ) -> None:
        self.mcp = mcp
        #: The caps on a submit's ``history`` (open_pool's max_history_messages/bytes).
        self.history_limits = history_limits
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self.max_depth = max_depth
        self.defaults = defaults
        self.events = events
        self.max_children = max_children
        self.children_timeout = children_timeout
        self._nursery = nursery
        self._runner = runner
        #: Where each task's checkpoints go (``open_pool(checkpoints=...)``), if anywhere.
        self.checkpoints: SqliteCheckpoints | None = None
        self._specs: dict[str, Spec] = {}
        self._numbers = itertools.count(1)
        # The run ids of the tasks accepted while a recover reads the rows (see recover).
        self._started = StartedRuns()
        self._claims = MemoryClaims(MAX_RESUME_CLAIMS)  # resumed without checkpoints
        self._answering = trio.Lock()  # Pool.answer's, one answer at a time
        # The rules and the state of slots, queue and task tree; this class only
        # carries out the effects its methods return (see _apply).
        self._core: PoolCore[Task] = PoolCore(max_concurrent, max_queued, max_depth)
        # The budgets over its tasks (the pool's own, and each spec's).
        self._budgets = Budgets(budget, nursery.start_soon, defaults.audit, events)
        # Runs parked taking their slot back (see _waits.take_back), by task.
        self._parked: dict[Task, trio.lowlevel.Task] = {}
        # Sees every event of every task (set from outside, e.g. subagent.otel): called
        # on the trio thread before the event goes to its destination, with or without
        # one; it must not block or raise. Read once per task when its run starts.
        self._observer: Callable[[Event], None] | None = None
        # The bound _apply every task keeps (one, not a bound method per task).
        self._applier: Callable[[list[Effect[Task]]], None] = self._apply

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
          SpecError: it has no model after inheritance, or a bad name or limit, or a
            cost budget (its own or the pool's) covers it and its model has no price.
        """
        from agentcore import Agent, ConfigurationError

        resolved = spec.inherit(self.defaults)
        assert resolved.model is not None
        try:
            Agent(model=resolved.model, tools=resolved.tools)
        except ConfigurationError as exc:
            raise SpecError(f"spec {spec.name!r}: {exc}") from exc
        self._budgets.check_spec(resolved)
        self._specs[spec.name] = resolved

    def mcp_tools(
        self, server: str, *names: str, taken: Collection[str] = ()
    ) -> tuple[Tool, ...]:
        """The tools of MCP server ``server`` (all it listed, or those ``names``), for a
        :class:`Spec`'s ``tools``; not a checkpoint. Of all it listed, those named in
        ``taken`` are left out (and reported). See :meth:`McpSessions.tools`.

        Raises:
          SpecError: the pool has no server of that name, or it has no such tool.
        """
        if self.mcp is None:
            raise SpecError(f"no MCP server is named {server!r}: the pool has none")
        return self.mcp.tools(server, *names, taken=taken)

    # -- submitting ----------------------------------------------------------------

    async def submit(
        self,
        name: str,
        input: str,
        *,
        parent_path: AgentPath = (),
        events: Stream | None = None,
        history: Iterable[Message] = (),
    ) -> Task:
        """Queue a run of agent ``name`` on ``input`` and return its Task. A checkpoint.

        It waits only while the queue is full, or while the task under
        ``parent_path`` (if one is live) has ``max_children`` live children: like a
        delegation, it then waits at most the pool's ``children_timeout`` for one to
        end (lending the caller's slot when the caller is that task's run); with
        :attr:`checkpoints`, until the task's start checkpoint is committed. Cancelling
        it while it waits for room leaves no trace in the pool.

        Args:
          name: A registered spec's name.
          input: The task text, given to the run verbatim as its user message.
          parent_path: The AgentPath the task runs under (its path extends it).
          events: Where the run's events go; by default the parent task's
            stream, else the pool's.
          history: Messages the run starts from, between its system prompt and
            ``input``: e.g. an earlier :attr:`Result.messages`, to go on with that
            conversation. Checked and copied before anything else: user, assistant
            and tool messages only (the pool adds the system prompt), each tool
            call answered before the next user or assistant message, within the
            pool's ``max_history_messages`` and ``max_history_bytes``.

        Raises:
          InvalidHistoryError: ``history`` is not fit to start a run from, or is
            over the pool's ``max_history_messages`` or ``max_history_bytes``.
          UnknownAgentError: no spec has that name.
          MaxDepthError: ``len(parent_path) >= max_depth``, or the submit comes from
            the run of a task of this pool at depth ``max_depth`` (a task started from
            within a run is one level below it, whatever ``parent_path`` says).
          MaxChildrenError: the parent's fan-out stayed full for ``children_timeout``.
          PoolClosedError: the pool is closed, or closes while this waits.
        """
        past = check_history(history, self.history_limits)
        return await self._submit(Submission(name, input, tuple(parent_path), events,
                                             history=past))

    async def _submit(self, asked: Submission, claimed: Task | None = None) -> Task:
        # ``claimed``: a fan-out slot of that task, claimed by the caller for this
        # child (the caller gives it back if this raises).
        await trio.lowlevel.checkpoint_if_cancelled()
        core = self._core
        own: Task | None = None  # a fan-out slot claimed here, given back if this raises
        try:
            while True:
                if own is not None and own._node.resolved:
                    # The parent resolved while this waited: no fan-out any more.
                    self._apply(core.release_fanout(own._node))
                    own = None
                try:
                    task = self._accept(asked, claimed or own)
                except trio.WouldBlock:
                    # Park until the core wakes this submit; a cancel withdraws it.
                    token = trio.lowlevel.current_task()
                    core.park_submitter(token)

                    def abort(_: object) -> trio.lowlevel.Abort:
                        core.withdraw_submitter(token)  # noqa: B023 (called before the next loop)
                        return trio.lowlevel.Abort.SUCCEEDED

                    await trio.lowlevel.wait_task_rescheduled(abort)
                except FanoutFull as full:
                    parent: Task = full.node.handle
                    lend = current_task.get() is parent
                    if await self._claim_child(parent, asked.name, lend):
                        own = parent
                else:
                    own = None
                    await start_committed(task)  # durable once returned
                    return task
        except BaseException:
            if own is not None:
                self._apply(core.release_fanout(own._node))
            raise

    async def resume(
        self, state: agentcore.RunState, *, name: str | None = None, events: Stream | None = None
    ) -> Task:
        """Queue the continuation of a paused run from its ``state`` and return its
        Task. A checkpoint (it waits only while the queue is full).

        The run is re-bound by name: to the spec ``name``, by default the one spec
        whose agent id is the state's (its name, unless the spec or the defaults set
        ``agent_id``); its tools, model, gate and sink are that spec's. The run keeps
        its run id and AgentPath, the task its path (a new one if a live task has it):
        its events and audit entries continue the paused run's. It continues as
        :meth:`agentcore.Agent.resume` does, and may pause again.

        With :attr:`checkpoints`, the state is recorded there as resumed (its run id
        and answers-independent key), with its answers as its run's checkpoint, before
        the task is queued: the same paused state given again (the same stored JSON
        resumed twice) raises :class:`AlreadyResumedError` instead of running its
        approved calls again; a resume not queued (cancelled, the pool closed) has
        its record undone. Without checkpoints the pool remembers the states it
        resumed (in memory, the newest ``MAX_RESUME_CLAIMS``) and refuses them
        again; another pool cannot (``subagent resume`` claims its file and ledger).
        A state with delegated runs (paused children) resumes its whole tree.

        Raises:
          agentcore.ResumeError: the state is not paused, has an unanswered call, an
            approved call of a tool the spec does not have, or a delegated call of a
            tool that does not continue paused runs.
          UnknownAgentError: no spec has that name (or that agent id); or several
            specs share the agent id and ``name`` is not given.
          AlreadyResumedError: the checkpoints (or this pool) record this state as
            resumed already.
          CheckpointError: the checkpoints cannot record it (nothing is queued).
          PoolClosedError: the pool is closed.
        """
        return await self._resume(state, name, events, claim=True)

    async def answer(
        self, state: agentcore.RunState, call_id: str, *, allow: bool, reason: str = "",
        by: str = "", path: AgentPath | None = None, name: str | None = None,
    ) -> None:
        """Approve (``allow``) or deny the deferred call ``call_id`` of the paused tree
        ``state`` (its root's state: ``TaskPaused.state`` or ``PausedTree.state``, not
        resumed yet), durably. With :attr:`checkpoints`, the tree with its answers so
        far is committed as its root's paused checkpoint before this returns (checked
        in the same transaction against the resumes recorded there), so that
        :meth:`recover`, after a restart or a crash, lists it with them: only its
        calls still unanswered wait, and its approved calls run once, when it is
        resumed. The answer is recorded in the audit sink of the spec ``name`` (the
        one :meth:`resume` binds the state to) as an ``answered`` entry, with ``by``
        (``approval`` entries follow when the tree resumes). ``state`` itself changes
        only once the answer is stored. Resume the tree (:meth:`resume`) once no call
        of it waits. A checkpoint.

        Raises:
          agentcore.RunStateError: the state is not paused, or no deferred call has
            this id (or several have and ``path`` is not given).
          UnknownAgentError: as :meth:`resume`.
          AlreadyResumedError: this state was resumed already.
          CheckpointError: the answer cannot be stored (the state is unchanged).
          agentcore.AuditError: its entry cannot be recorded (the answer is stored).
        """
        spec = self._specs[spec_name(self._specs, state, name)]
        # One at a time: each stores the whole tree, so two at once could each store a
        # copy without the other's answer.
        async with self._answering:
            await commit_answer(self.checkpoints, self._claims, spec.audit, state, call_id,
                                allow=allow, reason=reason, by=by, path=path)

    async def _resume(
        self, state: agentcore.RunState, name: str | None, events: Stream | None, *,
        claim: bool,
    ) -> Task:
        # ``claim``: record the state as resumed in the checkpoints (not for a
        # recovered state: a second crash is recovered again from the same row).
        name = bind(self._specs, state, name)
        number_past(self, run_ids(state))  # its new runs' ids are none of its tree's
        store = self.checkpoints if claim else None
        bound = name

        def submit() -> Awaitable[Task]:
            return self._submit(Submission(bound, state.input, (), events, resume=state))

        if store is not None:  # the claim is undone if the task is not queued
            return await claim_and_submit(store, name, state, submit)
        return await (self._claims.claim_and_submit(state, submit) if claim else submit())

    async def recover(self) -> Recovered:
        """Resume the root tasks a crash left unfinished in :attr:`checkpoints`, each
        from its last checkpoint (see ``subagent._durable._recovery``); returns their Tasks
        (a list), with the trees that wait for a human's answers, not resumed, in
        ``.paused`` (:class:`PausedTree`: answer, then :meth:`resume`). The pool's
        budget goes on from what those trees spent (each state's ``spent``), at once:
        a task submitted before they are resumed is counted after them. A checkpoint.
        Raises ``CheckpointError`` when the pool has no checkpoints."""
        if self.checkpoints is None:
            raise CheckpointError("this pool has no checkpoints: open_pool(checkpoints=...)")
        recovered = await recover(self, self.checkpoints)
        for tree in recovered.paused:
            self._budgets.restore(tree.state)
        return recovered

    def budget_spend(self) -> Spend | None:
        """What the pool's tasks have spent of its budget (``open_pool(budget=...)``),
        as the budget counts it (after :meth:`recover`, from what the recovered trees
        had spent); None when the pool has no budget. Not a checkpoint."""
        return self._budgets.spend()

    def submit_nowait(
        self,
        name: str,
        input: str,
        *,
        parent_path: AgentPath = (),
        events: Stream | None = None,
        history: Iterable[Message] = (),
    ) -> Task:
        """Like :meth:`submit`, but raise ``trio.WouldBlock`` where it would wait: the
        queue is full, or the parent's fan-out is (with :attr:`checkpoints`, the task is
        durable only once it is announced ``task_queued``). Not a checkpoint."""
        past = check_history(history, self.history_limits)
        try:
            return self._accept(Submission(name, input, tuple(parent_path), events, history=past))
        except FanoutFull:
            raise trio.WouldBlock from None

    def _accept(self, asked: Submission, claimed: Task | None = None) -> Task:
        # ``claimed``: the parent's fan-out slot claimed for this child, which it then
        # holds until it settles (else one is claimed here, or FanoutFull raised).
        name, parent_path, resume = asked.name, asked.parent_path, asked.resume
        spec = self._specs.get(name)
        if spec is None:
            raise UnknownAgentError(name, tuple(sorted(self._specs)))
        caller = current_task.get()
        mine = caller._node if caller is not None and caller.pool is self else None
        core = self._core
        try:
            parent_node, depth = core.admit(name, parent_path, mine)
        except QueueFull:
            raise trio.WouldBlock from None
        parent = parent_node.handle if parent_node is not None else None
        claim = False
        if parent_node is not None:
            if claimed is not None:
                assert claimed._node is parent_node
            elif core.claim_fanout(parent_node):
                claim = True
            else:
                raise FanoutFull(parent_node)
        try:
            events = asked.events
            if events is None:
                events = parent.events if parent is not None else self.events
            # A task started from within a run is bounded by that run's gate too.
            spec = delegated(spec, agentcore.current_run())
            budget = self._budgets.admit(spec, parent, parent_path, resume)
            path = None if resume is None else resumed_path(core.live, parent_path, resume)
            path = path or (*parent_path, f"{name}/{next(self._numbers):04d}")
            task = Task(
                path, name, asked.input, spec, self, parent, events, asked.call_id, core,
                self._applier, history=asked.history, resume=resume, depth=depth,
            )
            effects = core.accept(task._node, fanout=parent is not None,
                                  background=asked.background)
        except BaseException:
            if claim:
                assert parent_node is not None
                self._apply(core.release_fanout(parent_node))
            raise
        if budget is not None:
            budget.join(task)
        self._started.accepted(task)
        self._apply(effects)
        return task

    # -- the shell: carrying out the core's effects -----------------------------------

    def _apply(self, effects: list[Effect[Task]]) -> None:
        # The one place that starts runners, wakes parked tasks and sets events; its
        # cancels are one batch, made last (see _scopes). Per-task effects checked first.
        canceller: Canceller | None = None
        for effect in effects:
            if isinstance(effect, Grant):
                task = effect.node.handle
                waiter = self._parked.pop(task, None)
                if waiter is not None:
                    trio.lowlevel.reschedule(waiter)
                else:
                    task._grant()
            elif isinstance(effect, Resolve):
                effect.node.handle._resolve()
            elif isinstance(effect, CancelRun):
                if canceller is None:
                    canceller = Canceller()
                effect.node.handle._cancel_scopes(canceller)
            elif isinstance(effect, StartRunner):
                task = effect.node.handle
                # Named by its path alone: a root's is its one segment, no new string.
                self._nursery.start_soon(self._runner, task, name=format_path(task.path))
            elif isinstance(effect, WakeSubmitter | WakeFanout):
                trio.lowlevel.reschedule(effect.token)  # type: ignore[arg-type]
            else:
                assert isinstance(effect, Arrived)
                effect.node.handle._arrived()
        if canceller is not None:
            canceller.flush()

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Stop accepting tasks from outside; sync and idempotent.

        Queued and running tasks still finish, and they may still delegate.
        Submits waiting on a full queue raise :class:`PoolClosedError`.
        """
        self._apply(self._core.close())

    def cancel(self) -> None:
        """Close the pool and cancel every task; sync and idempotent.

        Queued tasks resolve as cancelled without running. Their ``task_cancelled``
        ledger entries say ``cause: "pool_closed"`` (unless a cancel reached a task
        before: see ``ledger.EntryKind.task_cancelled``).
        """
        self._apply(self._core.abort())

    def _cancel_for(self, cause: CancelCause) -> None:
        # cancel() naming who cancelled (see CancelCause): open_pool's on Ctrl-C.
        self._apply(self._core.abort(cause))

    def statistics(self) -> PoolStatistics:
        """A snapshot of the pool's counts and limits; not a checkpoint."""
        return self._core.statistics()

    # -- the waits of a run on its pool (subagent._pool._waits) -----------------------
    # The delegation tools, a layer below, reach them through the pool they are given.

    _lend_slot = lend_slot
    _claim_child = claim_child
