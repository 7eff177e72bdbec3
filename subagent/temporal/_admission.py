"""``AdmissionWorkflow``: a cluster-wide bound on the root trees running at once.

A long-lived workflow (id :func:`admission_id` of a name) that holds ``limit``
slots and a FIFO queue of at most ``max_queue`` waiting roots. A root started with
``RunOptions(admission=NAME)`` signals ``acquire`` (its workflow id) before it
schedules its activity and waits for the ``admission`` signal back: ``"granted"``,
or a refusal text (the queue is full) that ends the root ``failed``. It signals
``release`` when its activity ends (also on failure and cancel, and while it waits
for approvals; it acquires again to resume). Signal handlers only change the books;
the run loop sends the answers in order, so a replay rebuilds everything from the
history (deterministic). A grant that cannot be delivered (the root is gone) frees
the slot at once. Query ``state``: the limit, the holders and the waiting roots.

It never continues-as-new: each root adds about a dozen events to its history (two
signals in, one signal out, and their workflow tasks), so about 4,000 roots fit
under Temporal's ~50,000-event history limit; restart it (terminate it when idle:
the next ``start`` creates it again) before that, or add continue-as-new (carry
holders and waiting) for very long lives.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from temporalio import workflow

#: The name the admission workflow is registered under.
ADMISSION_WORKFLOW_NAME = "SubagentAdmission"
#: Roots waiting for a slot beyond which an ``acquire`` is refused, by default.
DEFAULT_MAX_QUEUE = 1000
#: The answer of a grant (anything else is a refusal, naming why).
GRANTED = "granted"


def admission_id(name: str) -> str:
    """The workflow id of the admission workflow called ``name``."""
    return f"subagent-admission/{name}"


@dataclass(frozen=True)
class AdmissionInput:
    """The admission workflow's input: slots, and the longest queue it accepts."""

    limit: int
    max_queue: int = DEFAULT_MAX_QUEUE


@dataclass(frozen=True)
class AdmissionState:
    """What the ``state`` query returns: the roots holding a slot and those waiting
    (workflow ids, in grant order)."""

    limit: int
    holders: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)


@workflow.defn(name=ADMISSION_WORKFLOW_NAME)
class AdmissionWorkflow:
    """A FIFO semaphore of root workflows, fed by signals (see the module)."""

    def __init__(self) -> None:
        self._limit = 1
        self._max_queue = DEFAULT_MAX_QUEUE
        self._holders: list[str] = []
        self._waiting: deque[str] = deque()
        self._outbox: deque[tuple[str, str]] = deque()

    @workflow.run
    async def run(self, books: AdmissionInput) -> None:
        self._limit = max(1, books.limit)
        self._max_queue = max(0, books.max_queue)
        self._grant()
        while True:
            await workflow.wait_condition(lambda: bool(self._outbox))
            target, answer = self._outbox.popleft()
            try:
                await workflow.get_external_workflow_handle(target).signal("admission", answer)
            except Exception:  # the root is gone: free what it held
                self._drop(target)

    def _grant(self) -> None:
        while len(self._holders) < self._limit and self._waiting:
            target = self._waiting.popleft()
            self._holders.append(target)
            self._outbox.append((target, GRANTED))

    def _drop(self, target: str) -> None:
        if target in self._holders:
            self._holders.remove(target)
        if target in self._waiting:
            self._waiting.remove(target)
        self._grant()

    @workflow.signal(name="acquire")
    def acquire(self, target: str) -> None:
        """Queue the root ``target`` (a workflow id) for a slot (once: a repeat is ignored)."""
        if not isinstance(target, str) or target in self._holders or target in self._waiting:
            return
        if len(self._waiting) >= self._max_queue:
            self._outbox.append((target, f"the admission queue is full "
                                         f"({self._max_queue} waiting)"))
            return
        self._waiting.append(target)
        self._grant()

    @workflow.signal(name="release")
    def release(self, target: str) -> None:
        """The root ``target`` gives its slot (or its place in the queue) back."""
        if isinstance(target, str):
            self._drop(target)

    @workflow.query(name="state")
    def state(self) -> AdmissionState:
        """The limit, the roots holding a slot and the roots waiting, in order."""
        return AdmissionState(self._limit, list(self._holders), list(self._waiting))
