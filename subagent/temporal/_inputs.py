"""The values that cross Temporal: workflow input, activity input, results, event batches.

Plain dataclasses of builtins (Temporal's default converter encodes them as JSON);
this module imports nothing but the standard library, so the workflow sandbox can
load it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

#: The name the workflow is registered under.
WORKFLOW_NAME = "SubagentWorkflow"
#: The name of the activity that runs a root task and its subtree.
ACTIVITY_NAME = "subagent_run_root"
#: Events the workflow keeps for followers (the oldest are dropped first).
DEFAULT_KEEP_EVENTS = 1000


def wire_size(text: str) -> int:
    """The bytes ``text`` takes in a Temporal payload. The default converter writes
    JSON with every character outside ASCII escaped (6 bytes; 12 outside the BMP) and
    quotes, backslashes and control characters escaped too, so a text may take up to
    12 times its length in characters. Not a checkpoint; O(len(text))."""
    return len(json.dumps(text))


#: Activity attempts of a root unless ``RunOptions.max_attempts`` says otherwise.
DEFAULT_MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class RunOptions:
    """How a root run is scheduled.

    Attributes:
      timeout: The spec's ``timeout`` (seconds): the workflow's execution timeout and
        the activity's start-to-close timeout; ``None``: no limit.
      heartbeat_timeout: Seconds without a heartbeat before Temporal declares the
        activity (its worker) lost.
      max_attempts: Activity attempts (3 by default). A retried attempt (its worker
        lost: heartbeat timeout) resumes the tree from the last heartbeat, which holds
        the checkpoints of every run of it, recorded before each mutating call: a
        finished mutating call is never run again, one in flight at the loss gets
        ``agentcore.lowlevel.INTERRUPTED`` unless it is read-only or idempotent.
      keep_events: The workflow's event retention (the last ``keep_events``).
      approval_timeout: Seconds a paused run waits for its answers (a durable
        workflow timer) before every unanswered call is denied ("no answer within N
        s"); ``None`` (the default): it waits until the workflow's execution timeout,
        for days if need be.
      admission: The name of a cluster-wide admission workflow (see
        ``AdmissionWorkflow``) the root asks for a slot before its activity runs
        (``None``: no bound but the workers' own). The root gives the slot back when
        its activity ends and while it waits for approvals.
      admission_limit, admission_max_queue: The slots and the longest queue of that
        admission workflow when this start creates it (an existing one keeps its own).
    """

    timeout: float | None = None
    heartbeat_timeout: float = 30.0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    keep_events: int = DEFAULT_KEEP_EVENTS
    approval_timeout: float | None = None
    admission: str | None = None
    admission_limit: int = 16
    admission_max_queue: int = 1000


@dataclass(frozen=True)
class RootInput:
    """The workflow's input: which registered agent runs on what task."""

    agent: str
    task: str
    options: RunOptions = field(default_factory=RunOptions)


@dataclass(frozen=True)
class ActivityInput:
    """The activity's input: the root's agent and task, and the workflow to report to."""

    workflow_id: str
    agent: str
    task: str
    round: int = 0
    """Which activity of the workflow this is (0, then one more per resume)."""
    state: str | None = None
    """The paused tree's ``RunState.to_json()`` this round resumes (``None``: a new run)."""
    answers: list[Answer] = field(default_factory=list)
    """The humans' answers to the paused state's deferred calls."""
    controls_from: int = 0
    """Controls (interrupt, steer) with a lower number were applied by earlier rounds."""


@dataclass(frozen=True)
class ApprovalRequest:
    """A deferred tool call waiting for a human (an ``agentcore.PendingApproval``).

    ``path`` is the AgentPath of the run that made it; ``arguments`` are the model's
    text (hostile: escape it before showing it on a terminal).
    """

    path: list[str]
    call_id: str
    tool: str
    arguments: str
    reason: str


@dataclass(frozen=True)
class Answer:
    """A human's answer to a deferred call (the ``approve`` / ``deny`` signals).

    ``path`` names the run that made the call when call ids repeat in a tree.
    """

    call_id: str
    approved: bool
    reason: str = ""
    by: str = ""
    path: list[str] | None = None


@dataclass(frozen=True)
class PendingAnswers:
    """What the ``pending`` query returns.

    Attributes:
      paused: The run is paused, waiting for answers.
      calls: The deferred calls of the paused run (empty when it is not paused).
      answers: The answers received so far for them.
      round: The activity round the pause ended (see :attr:`ActivityInput.round`).
    """

    paused: bool
    calls: list[ApprovalRequest]
    answers: list[Answer]
    round: int


@dataclass(frozen=True)
class Control:
    """A graceful control for the root: ``kind`` ``"interrupt"`` or ``"steer"`` (with
    ``text``), numbered from 0 in the order the workflow received them."""

    number: int
    kind: str
    text: str = ""


@dataclass(frozen=True)
class RootResult:
    """How the root task ended.

    Attributes:
      status: ``"finished"``, ``"failed"`` or ``"timed_out"`` (a cancel cancels the
        workflow instead); ``"paused"`` only in an activity's result, never the
        workflow's (it waits for the answers and resumes).
      output: The root's final answer (``""`` unless finished).
      error: Why it did not finish, if it did not.
      input_tokens, output_tokens: The usage of the whole tree.
      events: How many events the activity reported.
      ledger: The ledger file's name in the worker's ledger directory (``""``: none).
    """

    status: str
    output: str = ""
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    events: int = 0
    ledger: str = ""


@dataclass(frozen=True)
class ActivityResult:
    """What the activity returns to the workflow: the result, and the events not yet
    signalled (``tail``, numbered as batch ``seq`` of ``attempt``).

    When the tree paused, ``state`` is its ``RunState.to_json()`` (at most
    :data:`~subagent.temporal._approvals.MAX_STATE_BYTES`), ``pending`` its deferred
    calls, and ``result.status`` is ``"paused"``. ``controls`` is the number of the
    first control not applied yet.
    """

    result: RootResult
    attempt: int
    seq: int
    tail: list[str]
    state: str | None = None
    pending: list[ApprovalRequest] = field(default_factory=list)
    controls: int = 0
    tasks: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EventBatch:
    """Events the activity sends to its workflow (a signal).

    ``attempt`` and ``seq`` (from 0 per attempt) let the workflow drop a batch it
    already has; ``events`` are :func:`~subagent.temporal._wire.encode_event` texts.
    """

    attempt: int
    seq: int
    events: list[str]
    round: int = 0
    tasks: dict[str, str] | None = None
    """The status of every task of the tree (task path -> ``TaskStatus`` value), when
    it changed since the last batch."""
    controls: int = 0
    """The number of the first control the activity has not applied yet."""


@dataclass(frozen=True)
class EventPage:
    """What the ``events`` query returns for an offset.

    Attributes:
      first: The offset of ``events[0]`` (the oldest kept event when the asked offset
        is older than that).
      events: Encoded events from ``first`` on (at most the query's ``limit``).
      total: Events received so far.
      done: The workflow has its activity's result: no event follows ``total``.
    """

    first: int
    events: list[str]
    total: int
    done: bool
