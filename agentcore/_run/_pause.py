"""Pausing a run for a human: the outcome of a deferred call, and what the turn keeps.

A gate that defers a call (``GateDecision.defer``) makes the tool phase stop at the
next safe point: the calls already started finish, nothing new starts, and the
turn's calls without a result message are kept in order as ``PendingCall`` values
(:func:`pending_of`). The loop then ends the run ``paused``; ``_resume`` finishes
the turn when it is resumed.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from .._messages import ToolCall
from .._tools._tools import ToolOutcome
from ._pending import CallStatus, PendingCall
from ._state import RunState


@attrs.frozen(slots=True)
class Deferred(ToolOutcome):
    """The outcome of a call its gate deferred, or whose tool raised ``CallPaused``
    (``child``: the paused run's state): no result yet (never a message)."""

    call: ToolCall = ToolCall("", "")
    child: RunState | None = None
    schema: str = ""
    """The deferred call's tool's ``schema_digest`` (a gate's deferral only)."""


def pending_of(
    calls: Sequence[ToolCall], outcomes: Sequence[ToolOutcome]
) -> tuple[list[PendingCall], list[RunState]]:
    """The pending calls of a paused turn, and the states of the runs its delegated
    calls left paused (in the same order): ``calls`` from the first one without a
    result message, ``outcomes`` those of the calls that started (a prefix)."""
    pending = []
    children = []
    for k, call in enumerate(calls):
        if k >= len(outcomes):
            pending.append(PendingCall(call, CallStatus.waiting))
            continue
        outcome = outcomes[k]
        if isinstance(outcome, Deferred) and outcome.child is not None:
            pending.append(PendingCall(outcome.call, CallStatus.delegated, outcome.text))
            children.append(outcome.child)
        elif isinstance(outcome, Deferred):
            pending.append(PendingCall(outcome.call, CallStatus.deferred, outcome.text,
                                       schema=outcome.schema))
        else:
            pending.append(PendingCall(call, CallStatus.done, result=outcome.text,
                                       is_error=outcome.is_error, denied=outcome.denied))
    return pending, children
