"""``SubagentWorkflow``: one root task as a Temporal workflow.

The workflow is deterministic bookkeeping only: it schedules an activity
(:data:`~subagent.temporal._inputs.ACTIVITY_NAME`) that runs the root and its whole
subtree on a worker's trio pool, keeps the last ``keep_events`` events the activity
sends it (signal ``events``) for followers (query ``events``), and returns the
activity's :class:`RootResult`. Cancelling the workflow cancels the activity and
waits for it to finish its abort (the events of the abort arrive first).

**Durable approvals.** When the tree pauses (a gate deferred a call anywhere in it),
the activity ends with the paused state; the workflow then waits, with no activity
and no worker busy (``wait_condition``, for days if need be, or
``RunOptions.approval_timeout``), for an ``approve`` or ``deny`` signal per deferred
call (query ``pending``), and schedules a new activity, on any worker, that resumes
the state with the answers. **Controls**: the ``interrupt`` and ``steer`` signals are
kept (bounded, numbered) for the activity, which polls them (query ``controls``)
and applies them to the root. Query ``tasks``: the status of every task of the tree.
Everything it holds comes from its history (signals, the activities' results), so a
replay rebuilds it exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from ._admission import GRANTED, AdmissionAnswer, Ticket, admission_id
    from ._approvals import MAX_TASKS, Approvals, Controls
    from ._inputs import (
        ACTIVITY_NAME,
        WORKFLOW_NAME,
        ActivityInput,
        ActivityResult,
        Answer,
        Control,
        EventBatch,
        EventPage,
        PendingAnswers,
        RootInput,
        RootResult,
        wire_size,
    )

#: The most events one ``events`` query returns.
MAX_PAGE = 500
#: The most bytes of events one ``events`` query returns, as sent (at least one event).
MAX_PAGE_BYTES = 2 * 1024 * 1024


@workflow.defn(name=WORKFLOW_NAME)
class SubagentWorkflow:
    """A root task: its activity's bookkeeping, events for followers, the result."""

    def __init__(self) -> None:
        self._events: deque[str] = deque()
        self._keep = 1
        self._total = 0
        self._next_seq: dict[tuple[int, int], int] = {}
        self._done = False
        self._round = 0
        self._approvals: Approvals | None = None
        self._controls = Controls()
        self._tasks: dict[str, str] = {}
        self._applied = 0
        self._admission: str | None = None
        self._ticket = -1
        self._released = -1
        self._acquiring: asyncio.Future[None] | None = None

    @workflow.run
    async def run(self, root: RootInput) -> RootResult:
        options = root.options
        self._keep = max(1, options.keep_events)
        timeout = timedelta(seconds=options.timeout) if options.timeout else None
        state: str | None = None
        answers: list[Answer] = []
        controls_from = 0
        closed = False
        try:
            refused = await self._admit(options.admission)
            if refused:
                return refused
            while True:
                outcome: ActivityResult = await workflow.execute_activity(
                    ACTIVITY_NAME,
                    ActivityInput(workflow.info().workflow_id, root.agent, root.task,
                                  self._round, state, answers, controls_from),
                    result_type=ActivityResult,
                    start_to_close_timeout=timeout,
                    schedule_to_close_timeout=None if timeout else timedelta(days=3650),
                    heartbeat_timeout=timedelta(seconds=options.heartbeat_timeout),
                    retry_policy=RetryPolicy(maximum_attempts=max(1, options.max_attempts)),
                    cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                )
                self.add_events(EventBatch(outcome.attempt, outcome.seq, outcome.tail,
                                           self._round, outcome.tasks or None))
                controls_from = self._applied = max(self._applied, outcome.controls)
                if outcome.result.status != "paused" or outcome.state is None:
                    return outcome.result
                await self._release(options.admission)
                answers = await self._answers(outcome, options.approval_timeout)
                refused = await self._admit(options.admission)
                if refused:
                    return refused
                state = outcome.state
                self._round += 1
        except GeneratorExit:
            # Closed by garbage collection after its worker stopped with the run in
            # its cache (evicted, not ended: it goes on elsewhere): awaiting here would
            # raise "coroutine ignored GeneratorExit", so nothing is released.
            closed = True
            raise
        finally:
            self._done = True
            if not closed:
                await self._release(options.admission)

    def _my_ticket(self) -> Ticket:
        """This root's current admission ticket (its chain keeps it across a reset)."""
        info = workflow.info()
        return Ticket(info.workflow_id, info.first_execution_run_id, self._ticket)

    async def _admit(self, name: str | None) -> RootResult | None:
        """Wait for a slot of the admission workflow ``name`` (none: at once); a
        refused root ends ``failed`` (the result returned).

        Each call asks with the next ticket number; an answer to another number is
        ignored, so a late grant of a previous round is never taken for this one.
        """
        if name is None:
            return None
        self._admission = None
        self._ticket += 1
        handle = workflow.get_external_workflow_handle(admission_id(name))
        self._acquiring = asyncio.ensure_future(handle.signal("acquire", self._my_ticket()))
        # Shielded: a cancel that lands while the signal is in flight still reaches the
        # run; ``_release`` then waits for the acquire to be delivered before it
        # releases, so the release cannot overtake it (and if it ever did, the
        # admission workflow keeps a tombstone and ignores the late acquire).
        await asyncio.shield(self._acquiring)
        await workflow.wait_condition(lambda: self._admission is not None)
        if self._admission == GRANTED:
            return None
        self._released = self._ticket  # refused: nothing to give back
        return RootResult("failed", error=f"not admitted by {name!r}: {self._admission}")

    async def _release(self, name: str | None) -> None:
        """Give the slot (or the place in the queue) of admission ``name`` back, once
        per ticket, after its acquire was delivered."""
        if name is None or self._ticket < 0 or self._released >= self._ticket:
            return
        self._released = self._ticket
        if self._acquiring is not None:
            with contextlib.suppress(Exception):  # not delivered: release all the same
                await self._acquiring
        handle = workflow.get_external_workflow_handle(admission_id(name))
        await handle.signal("release", self._my_ticket())

    @workflow.signal(name="admission")
    def admitted(self, answer: AdmissionAnswer) -> None:
        """The admission workflow's answer to our current ticket: ``"granted"`` or why
        not (an answer to another ticket, or a malformed one, is ignored)."""
        if (isinstance(answer, AdmissionAnswer) and answer.number == self._ticket
                and isinstance(answer.answer, str) and self._admission is None):
            self._admission = answer.answer[:1000]

    async def _answers(self, outcome: ActivityResult, limit: float | None) -> list[Answer]:
        """Wait (durably) until every deferred call of the paused run has an answer."""
        books = self._approvals = Approvals(list(outcome.pending), self._round)
        try:
            if limit is None:
                await workflow.wait_condition(books.complete)
            else:
                await workflow.wait_condition(books.complete, timeout=timedelta(seconds=limit))
        except TimeoutError:
            books.deny_the_rest(f"no answer within {limit:g} s")
        self._approvals = None
        return books.in_order()

    @workflow.signal(name="approve")
    def approve(self, answer: Answer) -> None:
        """A human approves a deferred call (ignored unless it names exactly one)."""
        if self._approvals is not None:
            self._approvals.record(Answer(answer.call_id, True, answer.reason or "approved",
                                          answer.by, answer.path))

    @workflow.signal(name="deny")
    def deny(self, answer: Answer) -> None:
        """A human denies a deferred call (ignored unless it names exactly one)."""
        if self._approvals is not None:
            self._approvals.record(Answer(answer.call_id, False, answer.reason or "denied",
                                          answer.by, answer.path))

    @workflow.signal(name="interrupt")
    def interrupt(self) -> None:
        """Ask the root to stop gracefully (``Task.interrupt``), at its next poll."""
        self._controls.add("interrupt")

    @workflow.signal(name="steer")
    def steer(self, text: str) -> None:
        """Add a user message to the root's conversation (``Task.steer``)."""
        self._controls.add("steer", text if isinstance(text, str) else "")

    @workflow.query(name="controls")
    def controls(self, number: int) -> list[Control]:
        """The controls numbered ``number`` or more (for the activity)."""
        return self._controls.since(number)

    @workflow.query(name="controls_applied")
    def controls_applied(self) -> int:
        """How many controls the activities have applied to the root."""
        return self._applied

    @workflow.query(name="pending")
    def pending(self) -> PendingAnswers:
        """The paused run's deferred calls and the answers so far."""
        books = self._approvals
        if books is None:
            return PendingAnswers(False, [], [], self._round)
        return PendingAnswers(True, list(books.calls), books.in_order(), books.round)

    @workflow.query(name="tasks")
    def tasks(self) -> dict[str, str]:
        """The status of every task of the tree (task path -> ``TaskStatus`` value), as
        the activity last reported it."""
        return dict(self._tasks)

    @workflow.signal(name="events")
    def add_events(self, batch: EventBatch) -> None:
        """Append a batch from the activity, once (a repeated batch is dropped)."""
        key = (batch.round, batch.attempt)
        if batch.seq != self._next_seq.get(key, 0):
            return
        self._next_seq[key] = batch.seq + 1
        self._applied = max(self._applied, min(batch.controls, self._controls.total))
        if batch.tasks is not None:
            self._tasks = dict(list(batch.tasks.items())[:MAX_TASKS])
        for text in batch.events:
            self._events.append(text)
            self._total += 1
            if len(self._events) > self._keep:
                self._events.popleft()

    @workflow.query(name="events")
    def events_since(self, offset: int, limit: int = MAX_PAGE) -> EventPage:
        """The kept events from ``offset`` on (at most ``limit``, capped at MAX_PAGE)."""
        first_kept = self._total - len(self._events)
        first = min(max(offset, first_kept), self._total)
        count = max(0, min(limit, MAX_PAGE, self._total - first))
        start = first - first_kept
        page: list[str] = []
        size = 0
        for i in range(start, start + count):
            # Bounded as sent: the query's answer must stay under gRPC's 4 MiB.
            size += wire_size(self._events[i])
            if page and size > MAX_PAGE_BYTES:
                break
            page.append(self._events[i])
        return EventPage(first, page, self._total, self._done)
