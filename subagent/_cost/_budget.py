"""Budgets over a delegation tree: what a subtree may spend (:class:`Budget`), and the
spend of each budgeted subtree (:class:`Meter`, its one owner).

Pure bookkeeping: no trio, no I/O. The trio side (checking before each model call,
reporting, stopping the subtree) is ``subagent._cost._shell``.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import attrs

from agentcore import Spent, Usage

from .._errors import BudgetExceeded, SpecError, format_path

#: The limits of a :class:`Budget`, in the order they are checked and reported.
LIMITS = ("tokens", "input_tokens", "output_tokens", "cost", "model_calls", "tasks")

Path = tuple[str, ...]

#: The shell's handle of a task (``subagent.Task``): its ``path`` is read, and it is
#: given its ``_budget``; kept opaque here so that the accounting imports no trio side.
Task = Any


def _count(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(
            f"Budget {attribute.name} must be an integer of at least 1 or None, not {value!r}"
        )


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _cost(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    number = _number(value)
    if not (number > 0 and math.isfinite(number)):
        raise SpecError(
            f"Budget cost must be a positive finite number of US dollars or None, not {value!r}"
        )


def _warn_at(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    number = _number(value)
    if not 0 < number <= 1:
        raise SpecError(f"Budget warn_at must be a fraction above 0 and at most 1, not {value!r}")


def _grace(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    number = _number(value)
    if not (number > 0 and math.isfinite(number)):
        raise SpecError(f"Budget grace must be a positive finite number of seconds, not {value!r}")


@attrs.frozen
class Budget:
    """What a task's whole subtree may spend: its own run and every run below it
    (waited-for, background and critical children, orphans included).

    Give it as ``Spec.budget`` (each task of the spec owns one; ``Defaults.budget``
    is inherited like the other settings) or ``open_pool(budget=...)`` (the pool's
    tasks together own one). Budgets nest: a model call counts against every budget
    above it, and the first one spent stops its subtree.

    Before each model call of a run in the subtree, the budgets over it are checked;
    after it, its usage is added to each. A limit is *reached* when the spend is
    at or above it (``tasks``: when a submit would start one task more). Then:

    - ``budget_exceeded`` is reported (event and audit entry, on the owner's path);
    - the submit that reached it, and every later submit in the subtree, is refused
      with :class:`BudgetExceeded`; queued tasks of the subtree are cancelled;
    - every running task of the subtree is interrupted (``Task.interrupt``): each
      that had no model call in flight, other than the one whose call reached the
      limit, may make one more call, its summary-only answer; any other call is
      refused (the run ends ``error`` with :class:`BudgetExceeded`);
    - after ``grace`` seconds, what still runs is hard-aborted;
    - the owner fails with :class:`BudgetExceeded` (the pool's budget: every root
      task that was running), naming the limit, the spend and the path that reached it.

    **The bound.** A model call's usage is known only once it returns, so a budget
    can be overrun: by the call that reaches the limit, by calls in flight then, and
    by the summary calls. Each task of the subtree running when the limit is reached
    makes at most one of those, so the spend ends at most ``limit + N * U``, where N
    is the number of those tasks (``BudgetReport.running``) and U the largest usage
    of one model call. ``tasks`` is never overrun.

    ``budget_warning`` is reported once per limit when the spend first reaches
    ``warn_at`` of it.

    A ``cost`` budget needs a price for every model it covers: a spec whose model
    has none (see :func:`agentcore.models.has_price`) is refused at ``register``, or
    at submit (a ``SpecError``), rather than counted as free. A call reported
    without a cost counts as an unknown cost, which reaches the limit.

    Attributes:
      tokens: Input plus output tokens.
      input_tokens: Input tokens (cache reads and writes included).
      output_tokens: Output tokens.
      cost: US dollars (``Usage.cost``).
      model_calls: Model calls that returned (a retried failure is not one).
      tasks: Tasks started in the subtree, its owner included.
      warn_at: The fraction of a limit at which ``budget_warning`` is reported.
      grace: Seconds the stopped subtree has for its summary answers before the
        hard abort.

    Raises:
      SpecError: a limit that is not a positive integer (a positive finite number
        for ``cost``), no limit at all, a ``warn_at`` outside (0, 1], or a ``grace``
        that is not positive and finite.
    """

    tokens: int | None = attrs.field(default=None, kw_only=True, validator=_count)
    input_tokens: int | None = attrs.field(default=None, kw_only=True, validator=_count)
    output_tokens: int | None = attrs.field(default=None, kw_only=True, validator=_count)
    cost: float | None = attrs.field(default=None, kw_only=True, validator=_cost)
    model_calls: int | None = attrs.field(default=None, kw_only=True, validator=_count)
    tasks: int | None = attrs.field(default=None, kw_only=True, validator=_count)
    warn_at: float = attrs.field(default=0.8, kw_only=True, validator=_warn_at)
    grace: float = attrs.field(default=30.0, kw_only=True, validator=_grace)

    def __attrs_post_init__(self) -> None:
        if not self.limits():
            raise SpecError(f"a Budget needs at least one limit: give {_listing(LIMITS)}")

    def limits(self) -> tuple[tuple[str, float], ...]:
        """The limits it sets, as ``(name, value)`` in :data:`LIMITS` order."""
        values = ((name, getattr(self, name)) for name in LIMITS)
        return tuple((name, value) for name, value in values if value is not None)


def _listing(names: tuple[str, ...]) -> str:
    return f"{', '.join(names[:-1])} or {names[-1]}"


@attrs.frozen
class Spend:
    """What a budgeted subtree has spent (the quantities a :class:`Budget` limits).

    ``cost`` is None once a call with tokens came without a cost (unknown).
    """

    tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0
    model_calls: int = 0
    tasks: int = 0


def show(limit: str, value: float | None) -> str:
    """A quantity of ``limit`` as the messages write it."""
    if value is None:
        return "unknown"
    if limit == "cost":
        return f"${value:.6g}"
    return str(int(value))


@attrs.frozen
class BudgetReport:
    """What a ``budget_warning`` or ``budget_exceeded`` event says (``Event.budget``).

    Attributes:
      owner: The AgentPath of the task that owns the budget; ``()`` for the pool's.
      limit: The limit concerned (one of :data:`LIMITS`).
      allowed: Its value in the budget.
      spent: The subtree's spend of it (None: an unknown cost).
      by: The path whose model call (or under which a submit) got it there.
      action: ``"model call"`` or ``"submit"``.
      exceeded: True for ``budget_exceeded``, False for ``budget_warning``.
      budget: The budget.
      spend: The subtree's whole spend then.
      running: (``budget_exceeded``) The subtree's tasks running then: the N of the
        bound in :class:`Budget`.
    """

    owner: Path
    limit: str
    allowed: float
    spent: float | None
    by: Path
    action: str
    exceeded: bool
    budget: Budget
    spend: Spend
    running: int = 0

    def message(self) -> str:
        """The text of the report (and of the BudgetExceeded it makes)."""
        who = f"task {format_path(self.owner)}" if self.owner else "the pool"
        if self.exceeded:
            head = f"{who} spent its budget"
        else:
            head = f"{who} used {self.budget.warn_at:.0%} of its budget"
        where = "a model call of" if self.action == "model call" else "a submit under"
        return (
            f"{head}: {self.limit} {show(self.limit, self.spent)} of "
            f"{show(self.limit, self.allowed)}, reached by {where} {format_path(self.by)}"
        )

    def error(self, path: Path) -> BudgetExceeded:
        """The :class:`BudgetExceeded` of this report, for the task at ``path``."""
        text = self.message()
        if path != self.owner:
            text = f"task {format_path(path)} stopped: {text}"
        return BudgetExceeded(
            text, path, owner=self.owner, limit=self.limit, allowed=self.allowed,
            spent=self.spent, by=self.by,
        )


class Meter:
    """The spend of one budgeted subtree, and whether its budget is spent: the one
    owner of that state. Every model call and task of the subtree is added here.

    Attributes:
      budget: The budget.
      owner: The task owning it (None: the pool).
      exceeded: The report of the limit reached, once one is (it then stays).
      members: The subtree's tasks, while referenced (to stop them).
    """

    def __init__(self, budget: Budget, owner: Task | None) -> None:
        self.budget = budget
        self.owner = owner
        self.path: Path = owner.path if owner is not None else ()
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost: float | None = 0.0
        self.model_calls = 0
        self.tasks = 0
        self.warned: set[str] = set()
        self.exceeded: BudgetReport | None = None
        #: Whether it went on from a stored spend (:meth:`restore`), which counts the
        #: tasks resumed under it already.
        self.restored = False
        self.members: weakref.WeakSet[Task] = weakref.WeakSet()

    def spend(self) -> Spend:
        """What the subtree has spent so far."""
        return Spend(
            self.input_tokens + self.output_tokens, self.input_tokens, self.output_tokens,
            self.cost, self.model_calls, self.tasks,
        )

    def charge(self, usage: Usage, by: Path) -> list[BudgetReport]:
        """Add one model call's ``usage``, made at ``by``; return the reports it
        causes (warnings first, then the limit reached, if any). Not a checkpoint."""
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.model_calls += 1
        if self.cost is not None:
            if usage.cost is not None:
                self.cost += usage.cost
            elif usage.input_tokens or usage.output_tokens:
                self.cost = None
        return self._reports(by, "model call")

    def count_task(self, by: Path) -> list[BudgetReport]:
        """Count one task more, submitted under ``by``; return the reports it causes.
        A submit that would pass ``tasks`` is not counted: its report is the last, and
        gives the tasks started (the limit), not the one refused."""
        self.tasks += 1
        reports = self._reports(by, "submit")
        if self.exceeded is not None and reports and reports[-1].limit == "tasks":
            self.tasks -= 1
            self.exceeded = reports[-1] = attrs.evolve(
                reports[-1], spent=self.tasks, spend=self.spend())
        return reports

    def stored(self) -> Spent:
        """Its spend as a RunState stores it (``RunState.spent``)."""
        return Spent(self.input_tokens, self.output_tokens, self.cost, self.model_calls,
                     self.tasks)

    def restore(self, spent: Spent, by: Path) -> list[BudgetReport]:
        """Go on from ``spent`` (a resumed or recovered run's stored spend): each
        quantity raised to it (a meter that counted it already, the pool's in the
        pool that ran it, is left as it is). Returns the reports it causes, as
        :meth:`charge` does. Not a checkpoint."""
        self.input_tokens = max(self.input_tokens, spent.input_tokens)
        self.output_tokens = max(self.output_tokens, spent.output_tokens)
        if self.cost is not None:
            self.cost = None if spent.cost is None else max(self.cost, spent.cost)
        self.model_calls = max(self.model_calls, spent.model_calls)
        self.tasks = max(self.tasks, spent.tasks)
        self.restored = True
        return self._reports(by, "model call")

    def _reports(self, by: Path, action: str) -> list[BudgetReport]:
        if self.exceeded is not None:
            return []
        spend = self.spend()
        reports: list[BudgetReport] = []
        for name, allowed in self.budget.limits():
            spent = getattr(spend, name)
            over = spent > allowed if name == "tasks" else spent is None or spent >= allowed
            if spent is not None and name not in self.warned and (
                spent >= self.budget.warn_at * allowed
            ):
                self.warned.add(name)
                reports.append(
                    BudgetReport(self.path, name, allowed, spent, by, action, False,
                                 self.budget, spend)
                )
            if over and self.exceeded is None:
                self.exceeded = BudgetReport(
                    self.path, name, allowed, spent, by, action, True, self.budget, spend
                )
        if self.exceeded is not None:
            reports.append(self.exceeded)
        return reports


@attrs.define(eq=False)
class TaskBudget:
    """The budgets over one task, and where it stands with them.

    Attributes:
      meters: The meters of every budget over the task, its own first.
      own: The meter of its own budget (``Spec.budget``), if it has one.
      shell: The pool's budgets (``subagent._cost._shell.Budgets``).
      in_flight: Whether its run has a model call in flight.
      stopped: The report that stopped it, once a budget over it is spent.
      summary_left: Model calls it may still make once stopped (0 or 1).
      failure: The BudgetExceeded it failed with, if it owns a spent budget.
    """

    meters: tuple[Meter, ...]
    own: Meter | None
    shell: Any
    in_flight: bool = False
    stopped: BudgetReport | None = None
    summary_left: int = 0
    failure: BudgetExceeded | None = None

    def spent(self) -> dict[str, Spent]:
        """What its own budget (``"task"``) and the pool's (``"pool"``) have spent, as
        its run's state stores it (``RunState.spent``). Not a checkpoint."""
        out = {}
        if self.own is not None:
            out["task"] = self.own.stored()
        pool = self.shell.pool_meter
        if pool is not None and pool in self.meters:
            out["pool"] = pool.stored()
        return out

    def join(self, task: Task) -> None:
        """Make ``task`` (just accepted) a member of each meter over it."""
        task._budget = self
        if self.own is not None:
            self.own.owner = task
            self.own.path = task.path
        for meter in self.meters:
            meter.members.add(task)
