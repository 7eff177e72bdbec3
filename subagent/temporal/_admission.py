"""``AdmissionWorkflow``: a cluster-wide bound on the root trees running at once.

A long-lived workflow (id :func:`admission_id` of a name) that holds ``limit``
slots and a FIFO queue of at most ``max_queue`` waiting roots. A root started with
``RunOptions(admission=NAME)`` signals ``acquire`` with its :class:`Ticket` before it
schedules its activity and waits for the ``admission`` signal back
(:class:`AdmissionAnswer`: ``"granted"``, or a refusal text, the queue is full, that
ends the root ``failed``). It signals ``release`` with the same ticket when its
activity ends (also on failure and cancel, and while it waits for approvals; it
acquires again, with the next number, to resume). The rules (idempotent per root,
early releases leave tombstones, reclaim) are in :mod:`._admission_books`; signal
handlers only change the books and the run loop sends the answers in order, so a
replay rebuilds everything from the history. A grant that cannot be delivered (the
root is gone) frees the slot at once.

**Liveness.** A root that is terminated, times out or is reset away never releases.
Every ``reclaim_every`` seconds, only while a root holds a slot or waits, the
workflow runs the liveness check activity (:mod:`._admission_check`) on a batch of
at most 100 roots, in turn, and frees the slots of the closed ones.

**History.** Each root adds about a dozen events (two signals in, one out, and their
workflow tasks), each liveness check about ten. The workflow continues as new when
the server suggests it, when its history reaches ``history_limit`` events, or after
``roots_per_run`` acquires in this run, carrying holders, the queue, tombstones and
unsent answers (:class:`Carried`). Before it does, it stops the check, sends every
answer, and waits for all handlers to finish; a signal that lands while the
continue-as-new is being committed makes the server reject that workflow task, and
the retried task handles the signal first (nothing is lost).

Query ``state``: the limit, the holders and the waiting roots (workflow ids, in order),
the roots reclaimed so far, and the runs of this admission workflow's chain.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from ._admission_books import (
        DEFAULT_MAX_QUEUE,
        DEFAULT_MAX_TOMBSTONES,
        GRANTED,
        AdmissionAnswer,
        Books,
        Carried,
        Outgoing,
        Ticket,
        valid_ticket,
    )
    from ._admission_check import CHECK_ACTIVITY, MAX_CHECK, CheckInput, CheckResult

__all__ = ["GRANTED", "AdmissionAnswer", "Ticket"]

#: The name the admission workflow is registered under.
ADMISSION_WORKFLOW_NAME = "SubagentAdmission"
#: Seconds between liveness checks (while any root holds a slot or waits), by default.
DEFAULT_RECLAIM_EVERY = 30.0
#: History events after which the admission workflow continues as new, by default.
DEFAULT_HISTORY_LIMIT = 10_000
#: Acquires one run handles before it continues as new, by default.
DEFAULT_ROOTS_PER_RUN = 500
#: Seconds one liveness check activity may take.
CHECK_TIMEOUT = 60.0


def admission_id(name: str) -> str:
    """The workflow id of the admission workflow called ``name``."""
    return f"subagent-admission/{name}"


@dataclass(frozen=True)
class AdmissionInput:
    """The admission workflow's input: slots, the longest queue, how often closed roots
    are looked for, when to continue as new, and what the previous run carried."""

    limit: int
    max_queue: int = DEFAULT_MAX_QUEUE
    reclaim_every: float = DEFAULT_RECLAIM_EVERY
    history_limit: int = DEFAULT_HISTORY_LIMIT
    roots_per_run: int = DEFAULT_ROOTS_PER_RUN
    max_tombstones: int = DEFAULT_MAX_TOMBSTONES
    carried: Carried | None = None


@dataclass(frozen=True)
class AdmissionState:
    """What the ``state`` query returns: the roots holding a slot and those waiting
    (workflow ids, in grant order), how many closed roots were reclaimed, the runs of
    the admission workflow's chain so far (1 + its continue-as-news), and the
    liveness checks that answered."""

    limit: int
    holders: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    reclaimed: int = 0
    runs: int = 1
    checks: int = 0


@workflow.defn(name=ADMISSION_WORKFLOW_NAME)
class AdmissionWorkflow:
    """A FIFO semaphore of root workflows, fed by signals (see the module)."""

    @workflow.init
    def __init__(self, books: AdmissionInput) -> None:
        # The books are built here, not in ``run``: signals that came with the first
        # workflow task (after a continue-as-new, every acquire and release sent
        # during the switch) are handled before ``run`` starts, and must land in
        # the carried books, not in books that ``run`` would then replace.
        start = books.carried or Carried()
        self._books = Books(books.limit, books.max_queue, books.max_tombstones)
        self._books.restore(start)
        self._runs = max(1, start.runs)
        self._closing = False
        self._acquires = 0
        self._cursor = 0

    @workflow.run
    async def run(self, books: AdmissionInput) -> None:
        """Answer roots until it is time to continue as new (then never returns)."""
        checker = asyncio.ensure_future(self._check_loop(max(0.1, books.reclaim_every)))
        while True:
            await workflow.wait_condition(lambda: bool(self._books.outbox) or self._due(books))
            if self._books.outbox:
                await self._send(self._books.outbox.popleft())
            elif self._due(books):
                break
        # Continue as new: stop the check, then send everything owed, until nothing
        # is left and every handler is done (no await between that and the switch).
        self._closing = True
        await checker
        while True:
            await workflow.wait_condition(workflow.all_handlers_finished)
            if not self._books.outbox:
                break
            await self._send(self._books.outbox.popleft())
        nxt = AdmissionInput(books.limit, books.max_queue, books.reclaim_every,
                             books.history_limit, books.roots_per_run, books.max_tombstones,
                             self._books.carry(self._runs + 1))
        workflow.continue_as_new(nxt)

    def _due(self, books: AdmissionInput) -> bool:
        """Whether this run should continue as new."""
        info = workflow.info()
        return (info.is_continue_as_new_suggested()
                or info.get_current_history_length() >= max(100, books.history_limit)
                or self._acquires >= max(1, books.roots_per_run))

    async def _send(self, out: Outgoing) -> None:
        """Send one answer; one that cannot be delivered frees what it granted."""
        try:
            await workflow.get_external_workflow_handle(out.ticket.workflow_id).signal(
                "admission", AdmissionAnswer(out.ticket.number, out.answer))
        except Exception:  # the root is gone (or never was)
            self._books.undeliverable(out)

    async def _check_loop(self, every: float) -> None:
        """While roots are tracked, every ``every`` seconds, free the closed ones."""
        while not self._closing:
            await workflow.wait_condition(lambda: self._closing or self._books.tracked())
            try:
                await workflow.wait_condition(lambda: self._closing,
                                              timeout=timedelta(seconds=every))
                return  # closing
            except TimeoutError:
                pass
            keys = self._books.to_check(MAX_CHECK, self._cursor)
            self._cursor += len(keys)
            try:
                result = await workflow.execute_activity(
                    CHECK_ACTIVITY, CheckInput(keys), result_type=CheckResult,
                    start_to_close_timeout=timedelta(seconds=CHECK_TIMEOUT),
                    retry_policy=RetryPolicy(maximum_attempts=1),
                )
            except ActivityError:
                continue  # nothing learned: check again next time
            self._books.reclaim((w, r) for w, r in result.closed)

    @workflow.signal(name="acquire")
    def acquire(self, ticket: Ticket) -> None:
        """Queue the root of ``ticket`` for a slot (a repeat changes nothing)."""
        if valid_ticket(ticket):
            self._acquires += 1
            self._books.acquire(ticket)

    @workflow.signal(name="release")
    def release(self, ticket: Ticket) -> None:
        """The root of ``ticket`` gives its slot (or its place in the queue) back."""
        if valid_ticket(ticket):
            self._books.release(ticket)

    @workflow.query(name="state")
    def state(self) -> AdmissionState:
        """The limit, the roots holding a slot and the roots waiting, in order."""
        books = self._books
        return AdmissionState(books.limit, [w for w, _ in books.holders],
                              [w for w, _ in books.waiting], books.reclaimed, self._runs,
                              books.checks)
