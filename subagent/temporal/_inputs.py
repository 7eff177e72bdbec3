"""The values that cross Temporal: workflow input, activity input, results, event batches.

Plain dataclasses of builtins (Temporal's default converter encodes them as JSON);
this module imports nothing but the standard library, so the workflow sandbox can
load it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The name the workflow is registered under.
WORKFLOW_NAME = "SubagentWorkflow"
#: The name of the activity that runs a root task and its subtree.
ACTIVITY_NAME = "subagent_run_root"
#: Events the workflow keeps for followers (the oldest are dropped first).
DEFAULT_KEEP_EVENTS = 1000


@dataclass(frozen=True)
class RunOptions:
    """How a root run is scheduled.

    Attributes:
      timeout: The spec's ``timeout`` (seconds): the workflow's execution timeout and
        the activity's start-to-close timeout; ``None``: no limit.
      heartbeat_timeout: Seconds without a heartbeat before Temporal declares the
        activity (its worker) lost.
      max_attempts: Activity attempts. 1 (the default) until a retried attempt can
        resume from a heartbeat (issue 20's ``RunState``): a second attempt would start
        the tree over and could repeat finished mutating tool calls.
      keep_events: The workflow's event retention (the last ``keep_events``).
    """

    timeout: float | None = None
    heartbeat_timeout: float = 30.0
    max_attempts: int = 1
    keep_events: int = DEFAULT_KEEP_EVENTS


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


@dataclass(frozen=True)
class RootResult:
    """How the root task ended.

    Attributes:
      status: ``"finished"``, ``"failed"`` or ``"timed_out"`` (a cancel cancels the
        workflow instead).
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
    signalled (``tail``, numbered as batch ``seq`` of ``attempt``)."""

    result: RootResult
    attempt: int
    seq: int
    tail: list[str]


@dataclass(frozen=True)
class EventBatch:
    """Events the activity sends to its workflow (a signal).

    ``attempt`` and ``seq`` (from 0 per attempt) let the workflow drop a batch it
    already has; ``events`` are :func:`~subagent.temporal._wire.encode_event` texts.
    """

    attempt: int
    seq: int
    events: list[str]


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
