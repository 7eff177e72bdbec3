"""The trio side of budgets (see :class:`subagent.Budget`): each pool's :class:`Budgets`,
the model wrapper that checks and charges every model call of a budgeted task, the
reports (events and audit entries), and the stop of a spent subtree.

The accounting itself is ``subagent._cost._budget`` (one :class:`Meter` per budgeted subtree).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from agentcore import AuditError, ChatModel, EndReason, ModelRequest, ModelResponse, RunState
from agentcore._audit import record_within
from agentcore.models import has_price, model_name

from .._core._core import CancelCause, TaskStatus
from .._errors import SpecError, format_path
from .._events import Event, EventKind
from ._budget import Budget, BudgetReport, Meter, Spend, TaskBudget

if TYPE_CHECKING:
    from agentcore import DeltaSink
    from ledger import Sink

    from .._pool._task import Task
    from .._specs._spec import Spec
    from .._stream import Stream

#: Seconds a budget's audit entry may take (shielded).
REPORT_TIMEOUT = 5.0


def model_priced(model: object) -> bool:
    """Whether every answer of ``model`` has a known price: an adapter (or any model
    with a ``model`` id and an optional ``prices`` table) whose id has a price, a
    wrapper (``RateLimited``) of a priced model, or a ``FallbackModel`` of priced
    models. Not a checkpoint (it may load genai-prices' snapshot; see ``has_price``)."""
    members = getattr(model, "models", None)
    if isinstance(members, tuple) and members:
        return all(model_priced(member) for member in members)
    inner = getattr(model, "model", None)
    if isinstance(inner, str):
        table = getattr(model, "prices", None)
        return bool(inner) and has_price(inner, table if isinstance(table, Mapping) else None)
    if inner is not None and callable(getattr(inner, "complete", None)):
        return model_priced(inner)
    return False


class Budgets:
    """The budgets of one pool: its own (``open_pool(budget=...)``) and its tasks'.

    The pool calls :meth:`check_spec` at register and :meth:`admit` at each accept;
    a task's life calls :func:`budgeted_model` and :func:`settle` (through the task's
    :class:`TaskBudget`).
    """

    def __init__(
        self,
        budget: Budget | None,
        spawn: Callable[..., object],
        sink: Sink | None,
        events: Stream | None,
    ) -> None:
        self.pool_meter = Meter(budget, None) if budget is not None else None
        self._spawn = spawn
        self._sink = sink
        self._events = events

    def check_spec(self, spec: Spec) -> None:
        """Refuse a spec whose model has no price under a cost budget. Not a checkpoint.

        Raises:
          SpecError: its own budget (or the pool's) limits cost, and its model has no price.
        """
        if spec.budget is not None and spec.budget.cost is not None:
            self._priced(spec, "its budget")
        if self.pool_meter is not None and self.pool_meter.budget.cost is not None:
            self._priced(spec, "the pool's budget")

    def _priced(self, spec: Spec, whose: str) -> None:
        if not model_priced(spec.model):
            raise SpecError(
                f"spec {spec.name!r}: {whose} limits cost, and its model "
                f"{model_name(spec.model)!r} has no price: give the model a price table "
                f"(prices=), install subagent[prices], or budget tokens instead"
            )

    def admit(self, spec: Spec, parent: Task | None, parent_path: tuple[str, ...],
              resume: RunState | None = None) -> TaskBudget | None:
        """The budgets over a task of ``spec`` about to be accepted under
        ``parent_path``, the task counted in each (join it to them once accepted).
        None when no budget covers it. Not a checkpoint.

        ``resume``: the state of the run the task resumes: its own budget and the
        pool's go on from the spend the state stores (``RunState.spent``, see
        :meth:`Meter.restore`; a state without it: from zero, as before it was
        stored), and the task is not counted again in a budget that went on from a
        stored spend (which counts it).

        Raises:
          BudgetExceeded: a budget over it is spent (or its restored spend reaches a
            limit), or this task would pass its ``tasks`` limit (that budget is then
            spent: its subtree stops).
          SpecError: a cost budget covers it and its model has no price.
        """
        if parent is not None and parent._budget is not None:
            above: tuple[Meter, ...] = parent._budget.meters
        else:
            above = (self.pool_meter,) if self.pool_meter is not None else ()
        if not above and spec.budget is None:
            return None
        for meter in above:
            if meter.exceeded is not None:
                raise meter.exceeded.error(meter.path)
        for meter in above:
            if meter.budget.cost is not None:
                self._priced(spec, f"the budget of {_owner(meter)}")
        own = None
        if spec.budget is not None:
            own = Meter(spec.budget, None)
            own.tasks = 1
        if resume is not None:
            if own is not None:
                own.path = resume.path
            for name, restoring in (("task", own), ("pool", self.pool_meter)):
                stored = resume.spent.get(name)
                if restoring is not None and stored is not None and (
                        restoring is own or restoring in above):
                    self._reported(restoring, restoring.restore(stored, resume.path))
        # A resumed task is not counted again where a stored spend counts it already.
        counted = [m for m in above if resume is None or not m.restored]
        # A task that would pass a ``tasks`` limit is counted only there (and refused).
        blocking = next(
            (m for m in counted if m.budget.tasks is not None and m.tasks >= m.budget.tasks),
            None,
        )
        for meter in (blocking,) if blocking is not None else counted:
            self._reported(meter, meter.count_task(parent_path))
        return TaskBudget((own, *above) if own is not None else above, own, self)

    def restore(self, state: RunState) -> None:
        """Raise the pool's meter to the spend the paused ``state`` stores
        (``RunState.spent``: a tree that waits for answers, found by ``recover``), so
        that the pool's budget goes on from it at once, for every task, not only once
        that tree is resumed. A limit it reaches is reported and stops what runs under
        the pool's budget, as a model call reaching it would. Not a checkpoint."""
        meter = self.pool_meter
        stored = state.spent.get("pool")
        if meter is None or stored is None:
            return
        for report in meter.restore(stored, state.path):
            self._spawn(self._announce, meter, report, False)
            if report.exceeded:
                self._stop(meter, report, None)

    def spend(self) -> Spend | None:
        """What the pool's budget counts spent (None: the pool has no budget)."""
        return None if self.pool_meter is None else self.pool_meter.spend()

    def _reported(self, meter: Meter, reports: list[BudgetReport]) -> None:
        # Announce ``reports`` of ``meter``; a limit reached stops its subtree and
        # refuses the task being admitted.
        for report in reports:
            self._spawn(self._announce, meter, report, False)
            if report.exceeded:
                self._stop(meter, report, None)
                raise report.error(meter.path)

    async def call(
        self, task: Task, fn: Callable[[], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        """One model call of ``task``'s run: checked against the budgets over it, made,
        and charged to each. A checkpoint.

        Raises:
          BudgetExceeded: a budget over the task is spent and it may make no more calls.
          AuditError: a report could not be audited (fail closed: the run ends ``error``).
        """
        budget = task._budget
        assert budget is not None
        if budget.stopped is not None:
            if budget.summary_left < 1:
                raise budget.stopped.error(budget.stopped.owner)
            budget.summary_left -= 1
        budget.in_flight = True
        try:
            response = await fn()
        finally:
            budget.in_flight = False
        reached: list[tuple[Meter, BudgetReport]] = []
        for meter in budget.meters:
            for report in meter.charge(response.usage, task.path):
                if report.exceeded:
                    report = self._stop(meter, report, task)
                reached.append((meter, report))
        for meter, report in reached:
            await self._announce(meter, report, True)
        return response

    def _stop(self, meter: Meter, report: BudgetReport, crosser: Task | None) -> BudgetReport:
        # The limit is reached: every member of the subtree stops (see Budget).
        members = [task for task in list(meter.members) if not task.done]
        report = attrs.evolve(
            report, running=sum(task.status is TaskStatus.running for task in members)
        )
        meter.exceeded = report
        for task in members:
            state = task._budget
            if state is not None and state.stopped is None:
                state.stopped = report
                state.summary_left = 0 if state.in_flight or task is crosser else 1
            if task.status is TaskStatus.queued:
                task._cancel_for(CancelCause.budget)
            else:
                task.interrupt()
        self._spawn(self._enforce, meter, members)
        return report

    async def _enforce(self, meter: Meter, members: list[Task]) -> None:
        # After the grace period, hard-abort what still runs: the owner's run (so that
        # it fails with BudgetExceeded), every other task by a cancel.
        with trio.move_on_after(meter.budget.grace):
            for task in members:
                await task._wait_resolved()
            return
        for task in members:
            if task.done:
                continue
            run = task._run
            if run is not None and _owns(meter, task):
                run.abort(f"budget spent: grace of {meter.budget.grace:g}s over")
            else:
                task._cancel_for(CancelCause.budget)

    async def _announce(self, meter: Meter, report: BudgetReport, fail_closed: bool) -> None:
        # Audit a report in the owner's sink (the pool's defaults' for the pool's
        # budget), then send it as an event, which never waits (see Stream).
        kind = EventKind.budget_exceeded if report.exceeded else EventKind.budget_warning
        owner = meter.owner
        sink = owner.spec.audit if owner is not None else self._sink
        events = owner.events if owner is not None else self._events
        text = report.message()
        failure: AuditError | None = None
        if sink is not None:
            from ledger import Record

            entry = Record(
                str(kind),
                run_id=format_path(report.owner),
                path=report.owner,
                agent_id=owner.spec.agent_id if owner is not None else "",
                error=text if report.exceeded else None,
                data={
                    "limit": report.limit,
                    "allowed": report.allowed,
                    "spent": report.spent,
                    "by": "/".join(report.by),
                    "action": report.action,
                    "running": report.running,
                },
            )
            try:
                await record_within(sink, entry, REPORT_TIMEOUT, shield=True)
            except AuditError as exc:
                failure = exc
        if events is not None:
            error = text if report.exceeded else None
            if failure is not None:
                error = "; ".join(filter(None, (error, f"AuditError: {failure}")))
            call_id = owner.call_id if owner is not None else None
            events._send_reserved(
                Event(report.owner, kind, None, call_id, error=error, budget=report)
            )
        if failure is not None and fail_closed:
            raise failure

    def settle(self, task: Task, status: TaskStatus) -> TaskStatus:
        """How ``task`` ends, its run over: failed with BudgetExceeded if it owns a
        spent budget (its own, or the pool's for a root task), else ``status``."""
        state = task._budget
        assert state is not None
        for meter in state.meters:
            meter.members.discard(task)
        owned = [state.own] if state.own is not None else []
        if task.parent is None and self.pool_meter is not None:
            owned.append(self.pool_meter)
        report = next((m.exceeded for m in owned if m.exceeded is not None), None)
        if report is None:
            return status
        failure = report.error(task.path)
        state.failure = failure
        task._error = str(failure)
        if isinstance(task._cause, type(failure)) or status is TaskStatus.cancelled:
            task._cause = None
        if task._summary is not None:
            task._summary = attrs.evolve(
                task._summary, end_reason=EndReason.error, error=str(failure)
            )
        return TaskStatus.failed


def _owner(meter: Meter) -> str:
    return f"task {format_path(meter.path)}" if meter.owner is not None else "the pool"


def _owns(meter: Meter, task: Task) -> bool:
    return meter.owner is task or (meter.owner is None and task.parent is None)


@attrs.define(eq=False)
class Budgeted:
    """A task's model, checked and charged against the budgets over the task (see
    :meth:`Budgets.call`). It streams (:class:`StreamingBudgeted`) when its model does.

    Attributes:
      model: The model called.
      task: The task whose run calls it.
    """

    model: ChatModel
    task: Task

    @property
    def name(self) -> str:
        """The wrapped model's name (see :func:`agentcore.models.model_name`)."""
        return model_name(self.model)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The model's answer, if the budgets allow the call. A checkpoint."""
        shell: Budgets = self.task._budget.shell  # type: ignore[union-attr]
        return await shell.call(self.task, lambda: self.model.complete(request))


@attrs.define(eq=False)
class StreamingBudgeted(Budgeted):
    """The :class:`Budgeted` of a streaming model."""

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse:
        """The model's streamed answer, if the budgets allow the call. A checkpoint."""
        shell: Budgets = self.task._budget.shell  # type: ignore[union-attr]
        model: Any = self.model
        return await shell.call(self.task, lambda: model.stream(request, on_delta))


def budgeted_model(task: Task, model: ChatModel) -> ChatModel:
    """``model`` as ``task``'s run calls it: checked and charged when a budget covers
    the task, else unchanged. Not a checkpoint."""
    if task._budget is None:
        return model
    if callable(getattr(model, "stream", None)):
        return StreamingBudgeted(model, task)
    return Budgeted(model, task)


def settle(task: Task, status: TaskStatus) -> TaskStatus:
    """How ``task`` ends once its run is over (see :meth:`Budgets.settle`). Not a checkpoint."""
    if task._budget is None:
        return status
    shell: Budgets = task._budget.shell
    return shell.settle(task, status)
