"""Task: the handle of one submitted run, with its read-only attributes
(:class:`ReadOnly`) and the view of its resolution (:class:`Done`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, overload

import attrs
import trio

import agentcore
from agentcore import AgentPath, Message, RunSummary, Usage

from .._core._core import CANCEL_TEXTS, CancelCause, Effect, Node, PoolCore, TaskStatus
from .._errors import TaskCancelled, TaskError, TaskFailed, TaskPaused, TaskTimeout, format_path
from .._result import Result
from .._specs._history import conversation
from .._specs._spec import Spec
from .._stream import Stream
from ._scopes import Canceller

if TYPE_CHECKING:
    from .._core._statistics import PoolStatistics
    from .._cost._budget import TaskBudget
    from .._durable._store import SqliteCheckpoints
    from .._events import Event

T = TypeVar("T")


# ------------------------------------------------------------------------------
# Small parts of the Task handle: its read-only attributes and the view of its
# resolution.


class _Task(Protocol):
    _resolved: bool

    async def _wait_resolved(self) -> None: ...


def _refuse(obj: object, value: object) -> None:
    raise attrs.exceptions.FrozenAttributeError()


class ReadOnly(property, Generic[T]):
    """A read-only attribute over the private field ``private``: reading gives the
    field, setting raises FrozenAttributeError.

    A property whose getter is an ``operator.attrgetter``: a read runs no Python
    frame (a descriptor with a Python ``__get__`` cost every read a call, about
    twenty reads per pool run).
    """

    def __init__(self, private: str) -> None:
        super().__init__(attrgetter(private), _refuse)

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: type | None = None, /) -> ReadOnly[T]: ...

        @overload
        def __get__(self, obj: object, owner: type | None = None, /) -> T: ...

        def __get__(self, obj: object | None, owner: type | None = None, /) -> T | ReadOnly[T]:
            ...


class Done:
    """A view of a task's resolution with a trio.Event's ``wait`` and ``is_set``."""

    __slots__ = ("task",)

    def __init__(self, task: _Task) -> None:
        self.task = task

    def is_set(self) -> bool:
        return self.task._resolved

    async def wait(self) -> None:
        """Until the task resolves. A checkpoint."""
        await self.task._wait_resolved()


class Pool(Protocol):
    """The public face of the :class:`subagent.Pool` running a task, as the task
    sees it (structural, so that the task module does not depend on the pool's)."""

    max_concurrent: int
    max_queued: int
    max_depth: int
    max_children: int
    children_timeout: float
    events: Stream | None
    checkpoints: SqliteCheckpoints | None
    _observer: Callable[[Event], None] | None

    @property
    def specs(self) -> dict[str, Spec]: ...

    def register(self, spec: Spec) -> None: ...

    async def submit(
        self,
        name: str,
        input: str,
        *,
        parent_path: AgentPath = (),
        events: Stream | None = None,
        history: Iterable[Message] = (),
    ) -> Task: ...

    def submit_nowait(
        self,
        name: str,
        input: str,
        *,
        parent_path: AgentPath = (),
        events: Stream | None = None,
        history: Iterable[Message] = (),
    ) -> Task: ...

    def close(self) -> None: ...

    def cancel(self) -> None: ...

    def statistics(self) -> PoolStatistics: ...


@attrs.define(eq=False, repr=False)
class Task:
    """The handle of one run submitted to a :class:`Pool`.

    Attributes:
      path: The task's AgentPath, an immutable tuple (read-only).
      name: The name of the Spec it runs.
      input: The task text (the user message that starts the run).
      history: The messages the run starts from, before ``input`` (a tuple,
        empty unless the submit gave ``history``).
      spec: Its Spec, after inheritance.
      pool: The pool running it.
      parent: The task it was submitted under, if that is a task of this pool.
      events: Its destination stream, if any.
      call_id: The id of the tool call that delegated it, if one did.
      status: Its :class:`TaskStatus` now.
      children: The tasks submitted under it.

    A handle over the pool core's node of the task (see ``subagent._core._core``): its
    status, slot and place in the tree are the core's, read here.
    """

    # The read-only fields are private slots behind ReadOnly views (an on_setattr
    # hook would send the dozens of bookkeeping writes per run through __setattr__).
    _path: AgentPath
    _name: str
    _input: str
    _spec: Spec
    _pool: Pool
    _parent: Task | None
    _events: Stream | None
    _call_id: str | None
    # The core that owns this task's node, and the shell's function applying its effects.
    _core: PoolCore[Task]
    _apply: Callable[[list[Effect[Task]]], None]
    _node: Node[Task] = attrs.field(init=False)
    # The checked history the run starts from (see _specs._history.check_history).
    _history: tuple[Message, ...] = ()
    # The agentcore Run once started (steering and interrupts go through it).
    _run: agentcore.Run | None = None
    # Steering, follow-ups, interrupt sent before the run existed (lists made on use).
    _steering: list[str] | None = None
    _follow_ups: list[str] | None = None
    _interrupt: bool = False
    # The paused run's state this task resumes (Pool.resume), if it does.
    _resume: agentcore.RunState | None = None
    # Set once its start checkpoint is committed or refused, while a submit waits
    # for it (see _recovery.start_committed).
    _durable: trio.Event | None = None
    # A delegated task's ended checkpoint and its row's link, held by the
    # checkpointer until end_task stores it with the task's result (_durable._kept.end_row).
    _held_end: tuple[agentcore.Checkpoint, tuple[str | None, str | None]] | None = None
    # The task's scope, cancelled by Task.cancel (CancelRun); while the run runs also
    # its limits' scope (_limits; deadline: the earlier of timeout and idle_timeout;
    # _wall_deadline the wall one), a cancel told from a limit by Node.cancel_cause.
    # _reclaim: the shielded wait of a cancelled delegation taking its slot back.
    _scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    _limits: trio.CancelScope | None = None
    _wall_deadline: float = math.inf
    _reclaim: trio.CancelScope | None = None
    # Granted a slot (Grant) and resolved (Resolve): flags, with a ParkingLot made only
    # while someone waits on one (a trio.Event per flag cost every task ~430 B).
    _granted: bool = False
    _resolved: bool = False
    _grant_lot: trio.lowlevel.ParkingLot | None = None
    _done_lot: trio.lowlevel.ParkingLot | None = None
    _output: str = ""
    _structured: Any = None
    _summary: RunSummary | None = None
    # The ended run's messages and follow-ups (its RunResult's), for Result.
    _messages: tuple[Message, ...] = ()
    _follow_ups_left: tuple[str, ...] = ()
    _cause: BaseException | None = None
    _error: str | None = None
    # Its depth (see PoolCore.admit).
    _depth: int = 0
    # Where its results tool waits for background results (made on first use); the
    # fan-out, background delivery and usage roll-up are its node's (see _core._core).
    _arrivals: trio.lowlevel.ParkingLot | None = None
    # The budgets over it (see _cost._shell), if any.
    _budget: TaskBudget | None = None

    def __attrs_post_init__(self) -> None:
        parent = self._parent._node if self._parent is not None else None
        limit = self._spec.max_children
        self._node = Node(
            self._path,
            parent,
            self,
            depth=self._depth,
            fanout_limit=limit if limit is not None else self._pool.max_children,
        )

    @property
    def status(self) -> TaskStatus:
        return self._node.status

    @property
    def children(self) -> list[Task]:
        return [child.handle for child in self._node.children]

    # Read-only views of the private fields (setting one raises FrozenAttributeError).
    path = ReadOnly[AgentPath]("_path")
    name = ReadOnly[str]("_name")
    input = ReadOnly[str]("_input")
    history = ReadOnly[tuple[Message, ...]]("_history")
    spec = ReadOnly[Spec]("_spec")
    pool = ReadOnly["Pool"]("_pool")
    parent = ReadOnly["Task | None"]("_parent")
    events = ReadOnly["Stream | None"]("_events")
    call_id = ReadOnly["str | None"]("_call_id")

    def __repr__(self) -> str:
        return f"<subagent.Task {format_path(self.path)} {self.status}>"

    @property
    def _deliver_to(self) -> Task | None:
        # The task whose run its result is delivered into (a background child), if any.
        target = self._node.deliver_to
        return target.handle if target is not None else None

    @property
    def done(self) -> bool:
        """Whether the task has resolved (``wait()`` returns at once)."""
        return self._resolved

    @property
    def _done(self) -> Done:
        # What waits for the task to resolve, like a trio.Event's wait / is_set.
        return Done(self)

    def cancel(self) -> None:
        """Cancel this task and every task below it in the path tree; not a checkpoint.

        Siblings and ancestors are not affected. A queued task resolves as
        cancelled without running; a running one is aborted. The task resolves
        only after every descendant it cancelled has ended. A task submitted
        below its path later is cancelled too, whether or not this task has
        ended, as long as this Task is referenced (the pool keeps no record of a
        task that has ended and that nothing references). Idempotent.

        The ``task_cancelled`` ledger entry of each task it cancels says
        ``cause: "caller"`` in its data (a task a cancel reached before keeps that
        cancel's cause: see ``ledger.EntryKind.task_cancelled``).
        """
        self._apply(self._core.cancel(self._node))

    def _cancel_for(self, cause: CancelCause) -> None:
        # cancel() by the library itself, naming who cancelled (see CancelCause).
        self._apply(self._core.cancel(self._node, cause))

    def interrupt(self) -> None:
        """Ask the task's run to stop gracefully; not a checkpoint. Idempotent.

        The run skips its remaining tool calls, makes one more model call without
        tools to summarise, and ends ``interrupted``: :meth:`wait` returns that
        answer. A queued task is interrupted as soon as its run starts. Subagents
        it delegated to are not interrupted (:meth:`cancel` reaches them). Does
        nothing once the task's run has ended. See :meth:`agentcore.Run.interrupt`.
        """
        if self._run is not None:
            self._run.interrupt()
        elif not self.done:
            self._interrupt = True

    def steer(self, text: str) -> None:
        """Add a user message to the task's running conversation; not a checkpoint.

        The run reads it at the top of its next iteration (see
        :meth:`agentcore.Run.steer`). Sent to a queued task, it is read when the
        run starts, after the task text.

        Raises:
          agentcore.RunEndedError: the task's run has ended (or the task resolved
            without running).
        """
        if self._run is not None:
            self._run.steer(text)
        elif self.done:
            raise agentcore.RunEndedError(f"cannot steer: task {format_path(self.path)} has ended")
        else:
            if self._steering is None:
                self._steering = []
            self._steering.append(text)

    def follow_up(self, text: str) -> None:
        """Queue ``text`` for after the task's run; not a checkpoint.

        The run does not read it: it comes back, in order, in
        :attr:`Result.follow_ups` for the caller to run next (e.g. as a new submit
        with ``history=result.messages``), and the run emits a
        ``follow_up_queued`` event (see :meth:`agentcore.Run.follow_up`). Sent to a
        queued task, it is queued when the run starts.

        Raises:
          agentcore.RunEndedError: the task's run has ended (or the task resolved
            without running), like :meth:`steer`: a follow-up it would silently
            drop is refused instead.
        """
        if self._run is not None:
            self._run.follow_up(text)
        elif self.done:
            raise agentcore.RunEndedError(
                f"cannot follow up: task {format_path(self.path)} has ended"
            )
        else:
            if self._follow_ups is None:
                self._follow_ups = []
            self._follow_ups.append(text)

    # -- the shell's writes (the pool and _lifecycle.py); nothing else changes a Task --

    def _attach(self, run: agentcore.Run) -> None:
        # The task's run has been made: hand it what was sent before, in order.
        self._run = run
        for text in self._steering or ():
            run.steer(text)
        self._steering = None
        for text in self._follow_ups or ():
            run.follow_up(text)
        self._follow_ups = None
        if self._interrupt:
            run.interrupt()

    def _limit(self, deadline: float, wall: float) -> trio.CancelScope:
        # The run's limits (see _lifecycle.run_task), until _unlimit: the task's own
        # scope gets their deadline.
        scope = self._limits = self._scope
        scope.deadline = deadline
        self._wall_deadline = wall
        return scope

    def _unlimit(self) -> None:
        # The run has ended, its scope exited (run_task): nothing pushes its deadline now,
        # and it is left as it is (trio no longer registers it; a set costs a deadline).
        self._limits = None

    def _conclude(
        self,
        output: str,
        summary: RunSummary | None,
        cause: BaseException | None,
        error: str | None,
    ) -> None:
        # How the run ended (before the pool's run_ended).
        self._output = output
        self._summary = summary
        self._cause = cause
        self._error = error

    def _conclude_run(self, result: agentcore.RunResult) -> None:
        # How the run ended, from its RunResult (before the pool's run_ended).
        self._conclude(result.output, result.summary, result.exception, result.summary.error)
        self._structured = result.structured
        self._messages = result.messages
        self._follow_ups_left = result.follow_ups

    def _end_summary(self) -> None:
        # A run that did not return (cancelled) keeps the summary its end recorded.
        if self._summary is None and self._run is not None:
            self._summary = self._run.summary

    def _grant(self) -> None:
        self._granted = True
        if self._grant_lot is not None:
            self._grant_lot.unpark_all()

    async def _wait_granted(self) -> None:
        # The runner waits for its slot; a checkpoint (like trio.Event.wait).
        if self._granted:
            await trio.lowlevel.checkpoint()
            return
        if self._grant_lot is None:
            self._grant_lot = trio.lowlevel.ParkingLot()
        while not self._granted:
            await self._grant_lot.park()
        self._grant_lot = None

    def _resolve(self) -> None:
        self._resolved = True
        if self._done_lot is not None:
            self._done_lot.unpark_all()
            self._done_lot = None

    async def _wait_resolved(self) -> None:
        # Until the task resolves; a checkpoint (like trio.Event.wait).
        if self._resolved:
            await trio.lowlevel.checkpoint()
            return
        lot = self._done_lot
        if lot is None:
            lot = self._done_lot = trio.lowlevel.ParkingLot()
        await lot.park()

    def _cancel_scopes(self, canceller: Canceller) -> None:
        # The core's CancelRun: the run's scope, and a shielded take-back in progress,
        # added to the batch of cancels of one _apply (see _scopes.Canceller).
        canceller.add(self._scope)
        if self._reclaim is not None:
            canceller.add(self._reclaim)

    def _cancelled_otherwise(self) -> bool:
        # (agentcore's ScopeOwner: the run aborts by cancelling this task's scope.)
        # Whether the scope was cancelled by the task's cancel or its limits' deadline.
        return self._node.cancel_cause is not None or trio.current_time() >= self._scope.deadline

    def _cancel_text(self) -> str | None:
        # (agentcore's ScopeOwner.) What the run's abort entry says of a Cancelled
        # that ended it: the cause of the cancel that reached the task, or, when none
        # did and its deadline had not passed, a cancel from outside the pool (its
        # task_cancelled entry names pool_closed then); None for its deadline.
        cause = self._node.cancel_cause
        if cause is None:
            if trio.current_time() >= self._scope.deadline:
                return None
            cause = CancelCause.pool_closed
        return CANCEL_TEXTS[cause]

    def _reclaiming(self, deadline: float) -> trio.CancelScope:
        # The scope of a shielded take-back of the slot (see subagent._pool._waits.take_back).
        self._reclaim = trio.CancelScope(deadline=deadline)
        return self._reclaim

    def _reclaimed(self) -> None:
        self._reclaim = None

    async def _next_arrival(self) -> None:
        # Park until a background child of this task settles (the core's Arrived).
        if self._arrivals is None:
            self._arrivals = trio.lowlevel.ParkingLot()
        await self._arrivals.park()

    def _arrived(self) -> None:
        if self._arrivals is not None:
            self._arrivals.unpark_all()

    async def wait(self) -> Result:
        """Wait until the task resolves and return its Result. A checkpoint.

        Raises:
          TaskFailed: its run ended ``error`` (the run's exception is the cause).
          BudgetExceeded: (a TaskFailed) it owns a budget that was spent.
          TaskTimeout: it exceeded the spec's ``timeout`` or ``idle_timeout``.
          TaskCancelled: it was cancelled.
          TaskPaused: its run paused for a human's approval (the error holds its state).
        """
        await self._wait_resolved()
        failure = self._failure()
        if isinstance(failure, TaskFailed):
            raise failure from self._cause
        if failure is not None:
            raise failure
        assert self._summary is not None
        return Result(
            self.path,
            self._output,
            self._summary,
            self.tree_usage,
            self._structured,
            messages=conversation(self._messages),
            follow_ups=self._follow_ups_left,
        )

    @property
    def tree_usage(self) -> Usage:
        """The usage of this task's run plus that of every descendant that ended
        before it resolved (see :attr:`Result.tree_usage`); grows while it runs."""
        own = self._summary.usage if self._summary is not None else Usage()
        below = self._node.child_usage
        return own if below is None else own + below

    def _failure(self) -> TaskError | None:
        # The error wait() raises for an ended task, None for a finished one.
        where = format_path(self.path)
        if self.status is TaskStatus.finished:
            return None
        if self.status is TaskStatus.failed:
            if self._budget is not None and self._budget.failure is not None:
                return self._budget.failure
            return TaskFailed(f"task {where} failed: {self._error}", self.path)
        if self.status is TaskStatus.timed_out:
            return TaskTimeout(f"task {where} {self._error}", self.path)
        if self.status is TaskStatus.paused and self._run is not None:
            return TaskPaused(f"task {where} paused for approval", self.path, self._run.state)
        return TaskCancelled(f"task {where} was cancelled", self.path)

    def _progress(self, now: float) -> None:
        # An event of this run or of a descendant's at ``now`` (trio's clock): push back
        # every idle watchdog above it.
        task: Task | None = self
        while task is not None:
            scope = task._limits
            idle = task._spec.idle_timeout
            if scope is not None and idle is not None:
                scope.deadline = min(task._wall_deadline, now + idle)
            task = task._parent

