"""``SubagentWorkflow``: one root task as a Temporal workflow.

The workflow is deterministic bookkeeping only: it schedules one activity
(:data:`~subagent.temporal._inputs.ACTIVITY_NAME`) that runs the root and its whole
subtree on a worker's trio pool, keeps the last ``keep_events`` events the activity
sends it (signal ``events``) for followers (query ``events``), and returns the
activity's :class:`RootResult`. Cancelling the workflow cancels the activity and
waits for it to finish its abort (the events of the abort arrive first).
Everything it holds comes from its history (signals, the activity's result), so a
replay rebuilds it exactly.
"""

from __future__ import annotations

from collections import deque
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from ._inputs import (
        ACTIVITY_NAME,
        WORKFLOW_NAME,
        ActivityInput,
        ActivityResult,
        EventBatch,
        EventPage,
        RootInput,
        RootResult,
    )

#: The most events one ``events`` query returns.
MAX_PAGE = 500


@workflow.defn(name=WORKFLOW_NAME)
class SubagentWorkflow:
    """A root task: its activity's bookkeeping, events for followers, the result."""

    def __init__(self) -> None:
        self._events: deque[str] = deque()
        self._keep = 1
        self._total = 0
        self._next_seq: dict[int, int] = {}
        self._done = False

    @workflow.run
    async def run(self, root: RootInput) -> RootResult:
        options = root.options
        self._keep = max(1, options.keep_events)
        timeout = timedelta(seconds=options.timeout) if options.timeout else None
        try:
            outcome: ActivityResult = await workflow.execute_activity(
                ACTIVITY_NAME,
                ActivityInput(workflow.info().workflow_id, root.agent, root.task),
                result_type=ActivityResult,
                start_to_close_timeout=timeout,
                schedule_to_close_timeout=None if timeout else timedelta(days=3650),
                heartbeat_timeout=timedelta(seconds=options.heartbeat_timeout),
                retry_policy=RetryPolicy(maximum_attempts=max(1, options.max_attempts)),
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            self.add_events(EventBatch(outcome.attempt, outcome.seq, outcome.tail))
            return outcome.result
        finally:
            self._done = True

    @workflow.signal(name="events")
    def add_events(self, batch: EventBatch) -> None:
        """Append a batch from the activity, once (a repeated batch is dropped)."""
        if batch.seq != self._next_seq.get(batch.attempt, 0):
            return
        self._next_seq[batch.attempt] = batch.seq + 1
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
        page = [self._events[i] for i in range(start, start + count)]
        return EventPage(first, page, self._total, self._done)
