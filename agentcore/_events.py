"""Lifecycle events of one run."""

from __future__ import annotations

import enum
import time as _time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from ._messages import Message, ToolCall, Usage
from ._summary import RunSummary
from ._tools._gate import GateDecision


class EventKind(enum.StrEnum):
    """What an :class:`Event` reports."""

    agent_start = "agent_start"
    turn_start = "turn_start"
    model_request = "model_request"
    model_delta = "model_delta"
    model_response = "model_response"
    tool_start = "tool_start"
    gate_decision = "gate_decision"
    tool_end = "tool_end"
    tool_skipped = "tool_skipped"
    retry = "retry"
    error = "error"
    steering_injected = "steering_injected"
    follow_up_queued = "follow_up_queued"
    interrupt_received = "interrupt_received"
    context_compressed = "context_compressed"
    output_validation = "output_validation"
    agent_end = "agent_end"


def wall_clock() -> float:
    """Seconds since the epoch, the default of every event's ``time``.

    It looks ``time.time`` up on each call, so a test can pin the wall clock with
    ``monkeypatch.setattr(time, "time", ...)``.
    """
    return _time.time()


@attrs.frozen(slots=True)
class Event:
    """One thing a run did, in the order it did it.

    Attributes:
      kind: What happened.
      run_id: The run that emitted it.
      agent_id: That run's agent id.
      turn: The turn it belongs to (0 before the first turn).
      text: The input (agent_start), a text delta (model_delta), a tool result
        (tool_end, tool_skipped), an error or retry reason, the injected or
        follow-up text (steering_injected, follow_up_queued), ``interrupt`` or
        ``abort: <reason>`` (interrupt_received), what was dropped
        (context_compressed), ``ok`` or the problem (output_validation).
      message: The assistant message (model_response) or the injected message
        (steering_injected).
      call: The tool call (tool_start, gate_decision, tool_end, tool_skipped; the
        ``final_result`` call of output_validation, None for a text answer).
      decision: The gate's decision (gate_decision).
      is_error: Whether a tool result (tool_end) is an error, or an attempt at
        typed output invalid (output_validation).
      usage: Tokens of a model call (model_response).
      summary: The run summary (agent_end).
      attempt: The retry's number, 1 for the first retry of a model call (retry).
      time: Wall-clock seconds since the epoch, taken when the event was created (so
        an exporter that reads it late still has the moment it happened). Not part of
        equality: two events that report the same thing compare equal.
    """

    kind: EventKind
    run_id: str = ""
    agent_id: str = ""
    turn: int = 0
    text: str = ""
    message: Message | None = None
    call: ToolCall | None = None
    decision: GateDecision | None = None
    is_error: bool = False
    usage: Usage | None = None
    summary: RunSummary | None = None
    attempt: int = 0
    time: float = attrs.field(factory=wall_clock, eq=False)


class _Open(Event):
    """An :class:`Event` under construction: the same slots (it adds none), set by
    plain attribute stores. :func:`event_of` fills one and turns it into an
    ``Event`` (``__class__`` assignment, allowed since the layouts are the same), so
    no instance of this class is ever seen outside :func:`event_of`.

    Both ``__setattr__`` and ``__delattr__`` are ``object``'s own, so that a store
    into a slot is a plain slot store (``Event``'s frozen ``__setattr__`` refuses
    them; with its Python ``__delattr__`` left, every store would go through a
    Python-level lookup).
    """

    __slots__ = ()
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__


_new = object.__new__


def event_of(
    kind: EventKind,
    run_id: str,
    agent_id: str,
    turn: int,
    text: str = "",
    message: Message | None = None,
    call: ToolCall | None = None,
    decision: GateDecision | None = None,
    is_error: bool = False,
    usage: Usage | None = None,
    summary: RunSummary | None = None,
    attempt: int = 0,
) -> Event:
    """The :class:`Event` ``Event(kind, run_id, agent_id, turn, ...)`` would build,
    equal to it field for field, its ``time`` taken now as :func:`wall_clock` takes
    it; built by plain slot stores instead of ``Event``'s frozen ``__init__`` (one
    ``object.__setattr__`` call per field), for a run's own events on its hot path.
    Not a checkpoint. Not public API: outside code builds events with ``Event(...)``.
    """
    event: Any = _new(_Open)  # an Event once its class is set below
    event.kind = kind
    event.run_id = run_id
    event.agent_id = agent_id
    event.turn = turn
    event.text = text
    event.message = message
    event.call = call
    event.decision = decision
    event.is_error = is_error
    event.usage = usage
    event.summary = summary
    event.attempt = attempt
    event.time = _time.time()  # as wall_clock: looked up on each call
    event.__class__ = Event
    return event  # type: ignore[no-any-return]


#: Where a run sends its events; awaiting it may block (backpressure). A sink may also
#: offer a synchronous ``emit_nowait(event) -> bool`` (see :func:`taken_now`).
EventSink = Callable[[Event], Awaitable[None]]


def taken_now(sink: EventSink, event: Event) -> bool:
    """Whether ``sink`` took ``event`` now, without being awaited. Not a checkpoint.

    A sink that can deliver some events synchronously offers ``emit_nowait(event)``:
    it delivers the event exactly as awaiting the sink would have (order,
    cancellation, backpressure) and returns True, or does nothing and returns False
    when delivering would have to wait or check in with the scheduler (a full
    buffer, a cancelled task). False, having done nothing, for a sink without it: the
    caller then awaits ``sink(event)``.
    """
    nowait = getattr(sink, "emit_nowait", None)
    return nowait is not None and nowait(event) is True
