"""How a run ended: :class:`EndReason` and :class:`RunSummary`."""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ._messages import Usage


class EndReason(enum.StrEnum):
    """Why a run ended."""

    stop = "stop"
    """The model answered without tool calls."""
    max_turns = "max_turns"
    """The turn limit was reached before a final answer."""
    aborted = "aborted"
    """The run was cancelled (hard abort)."""
    timeout = "timeout"
    """A wall-clock or idle limit ended the run."""
    error = "error"
    """The model (or the audit sink) failed."""
    interrupted = "interrupted"
    """A graceful interrupt ended the run after a summarising model call."""
    paused = "paused"
    """A gate deferred a tool call to a human: the run stopped at a safe point and
    can be resumed from its ``RunState`` (:meth:`Agent.resume`)."""


@attrs.frozen(slots=True)
class RunSummary:
    """What one run did.

    Attributes:
      turns: Turns taken: iterations of the loop, each one model call (plus any
        retries of it) and its tool calls; a graceful interrupt's summarising call
        is a turn too, so it may exceed ``max_turns`` by one.
      tool_calls: Tool calls the model asked for.
      tool_errors: Tool calls that produced an error result other than a denial.
      denied: Tool calls the gate denied.
      usage: Tokens used by this run's own model calls.
      end_reason: Why the run ended.
      error: The error text when the run ended ``error`` or ``timeout``, else ``None``.
      duration: Seconds from start to end on trio's clock.
    """

    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    denied: int = 0
    usage: Usage = Usage()
    end_reason: EndReason = EndReason.stop
    error: str | None = None
    duration: float = 0.0


def _slot_setters() -> tuple[Any, ...]:
    # The slots' own setters, in field order: RunSummary has no validator, converter
    # or post-init step that its __init__ would run besides setting them.
    fields = attrs.fields(RunSummary)
    assert not any(f.validator or f.converter for f in fields)
    assert not hasattr(RunSummary, "__attrs_post_init__")
    return tuple(RunSummary.__dict__[f.name].__set__ for f in fields)


(_TURNS, _TOOL_CALLS, _TOOL_ERRORS, _DENIED, _USAGE, _END_REASON, _ERROR, _DURATION) = (
    _slot_setters()
)
_new = object.__new__


def ended(
    turns: int, tool_calls: int, tool_errors: int, denied: int, usage: Usage,
    end_reason: EndReason, error: str | None, duration: float,
) -> RunSummary:
    """The :class:`RunSummary` of these fields, equal to and indistinguishable from
    ``RunSummary(...)`` of them: every run's end makes one, and this sets its slots
    directly (the frozen class's ``__init__`` goes through ``object.__setattr__``
    for each field, about twice the cost). Not a checkpoint."""
    summary = _new(RunSummary)
    _TURNS(summary, turns)
    _TOOL_CALLS(summary, tool_calls)
    _TOOL_ERRORS(summary, tool_errors)
    _DENIED(summary, denied)
    _USAGE(summary, usage)
    _END_REASON(summary, end_reason)
    _ERROR(summary, error)
    _DURATION(summary, duration)
    return summary
