"""subagent events: a run's agentcore events tagged with its AgentPath, and pool events."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

import attrs

import agentcore
from agentcore import AgentPath, RunSummary, Usage
from agentcore._events import wall_clock

if TYPE_CHECKING:
    # (for annotations only: the budgets report through events, so _cost imports this)
    from ._cost._budget import BudgetReport


class EventKind(enum.StrEnum):
    """The kinds of the pool's own events (a run's events keep their ``agentcore.EventKind``).

    Both are str enums, so ``event.kind == "agent_end"`` works for either.
    """

    task_queued = "task_queued"
    """The pool accepted the task."""
    task_started = "task_started"
    """The task got a concurrency slot; its run starts next."""
    task_finished = "task_finished"
    """The task's run ended other than by a cancel (``summary`` says how)."""
    task_cancelled = "task_cancelled"
    """The task was cancelled, before or while running."""
    task_orphaned = "task_orphaned"
    """A background task's result (or error) arrived after its parent run ended;
    ``path`` is the task's, ``output`` or ``error`` what it produced."""
    result_delivered = "result_delivered"
    """A background task's result (or error) was delivered into its parent run as a
    message; ``path`` is the parent's, ``child`` the task's."""
    event_loop_blocked = "event_loop_blocked"
    """The trio thread reached no checkpoint for longer than the pool's
    ``loop_watchdog``; ``stall`` says how long, in which tool call (``path`` and
    ``call_id`` are the calling run's and the call's, if one was running) and where."""
    budget_warning = "budget_warning"
    """A budget's spend reached its ``warn_at`` fraction of one of its limits; ``path``
    is the budget owner's (``()`` for the pool's), ``budget`` says which and how much."""
    budget_exceeded = "budget_exceeded"
    """A budget's limit was reached: its subtree stops (see :class:`subagent.Budget`);
    ``path`` is the owner's, ``budget`` says which, ``error`` the message."""
    mcp_server_error = "mcp_server_error"
    """An MCP server of the pool did not start, failed or stopped answering (it is
    started again after a backoff); ``path`` is ``()``, ``error`` names the server."""


@attrs.frozen
class LoopStall:
    """What the watchdog saw while the event loop was blocked (``event_loop_blocked``).

    Attributes:
      duration: Seconds (wall clock) the loop did not reach a checkpoint, measured
        from the heartbeat it did not serve (up to a quarter of the threshold short).
      tool: The name of the tool whose call was running on the trio thread, if any.
      call_id: That call's id.
      path: The AgentPath of the run that made the call (``()`` if none).
      stack: The trio thread's stack when the stall was seen, innermost frame last.
    """

    duration: float
    tool: str | None
    call_id: str | None
    path: AgentPath
    stack: str


def _event_time(event: Event) -> float:
    # A run's event keeps the moment the run emitted it; a pool event is stamped now.
    inner = event.event
    return inner.time if inner is not None else wall_clock()


@attrs.frozen(slots=True)
class Event:
    """One event, tagged with the AgentPath of the run (or task) it concerns.

    Attributes:
      path: The AgentPath of the run that emitted it, or of the task a pool
        event is about.
      kind: ``agentcore.EventKind`` for a run's events, :class:`EventKind` for pool events.
      event: The agentcore event, or ``None`` for a pool event.
      call_id: The id of the tool call that delegated this task, if one did.
      summary: The run summary (``task_finished``, and ``task_cancelled`` once it ran;
        ``task_orphaned``).
      error: Why the task failed, timed out or was cancelled, if it did.
      child: The background task whose result was delivered (``result_delivered``).
      output: The background task's output (``result_delivered``, ``task_orphaned``;
        ``None`` when it produced an error instead).
      tree_usage: The usage of the task and all its descendants that ended before it
        resolved (``task_finished``, ``task_cancelled``, ``task_orphaned``).
      stall: What the loop watchdog saw (``event_loop_blocked``).
      budget: The limit, spend and path concerned (``budget_warning``, ``budget_exceeded``).
      time: Wall-clock seconds since the epoch when the event was created: the
        agentcore event's own ``time`` for a run's event, else taken now. Not part of
        equality.
    """

    path: AgentPath
    kind: agentcore.EventKind | EventKind
    event: agentcore.Event | None = None
    call_id: str | None = None
    summary: RunSummary | None = None
    error: str | None = None
    child: AgentPath | None = None
    output: str | None = None
    tree_usage: Usage | None = None
    stall: LoopStall | None = None
    budget: BudgetReport | None = None
    time: float = attrs.field(
        default=attrs.Factory(_event_time, takes_self=True), eq=False
    )


class _Open(Event):
    """An :class:`Event` under construction: the same slots (it adds none), set by
    plain attribute stores. :func:`tagged_of` fills one and turns it into an
    ``Event`` (``__class__`` assignment, allowed since the layouts are the same), so
    no instance of this class is ever seen outside :func:`tagged_of`.

    Both ``__setattr__`` and ``__delattr__`` are ``object``'s own, so that a store
    into a slot is a plain slot store (see ``ledger._record``).
    """

    __slots__ = ()
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__


_new = object.__new__


def tagged_of(
    path: AgentPath,
    kind: agentcore.EventKind | EventKind,
    event: agentcore.Event | None,
    call_id: str | None,
    summary: RunSummary | None = None,
    error: str | None = None,
    tree_usage: Usage | None = None,
) -> Event:
    """The :class:`Event` ``Event(path, kind, event, call_id, summary, error,
    tree_usage=tree_usage)`` would build, equal to it field for field (its ``time``
    ``event``'s, else taken now), built by plain slot stores instead of ``Event``'s
    frozen ``__init__``: for the pool's own wrapping of a run's events and its task
    lifecycle events, on the hot path. Not a checkpoint. Not public API.
    """
    tagged: Any = _new(_Open)  # an Event once its class is set below
    tagged.path = path
    tagged.kind = kind
    tagged.event = event
    tagged.call_id = call_id
    tagged.summary = summary
    tagged.error = error
    tagged.child = None
    tagged.output = None
    tagged.tree_usage = tree_usage
    tagged.stall = None
    tagged.budget = None
    tagged.time = event.time if event is not None else wall_clock()
    tagged.__class__ = Event
    return tagged  # type: ignore[no-any-return]
