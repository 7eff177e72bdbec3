"""The activity's side of a pause: the paused tree's state as a Temporal payload, and
the state a new round resumes (the humans' answers applied).

A paused run ends its activity with ``RunState.to_json()`` of the root (children
included) and its deferred calls; the workflow waits for an answer per call and
schedules a new activity, on any worker, that calls :func:`resumed_state` and then
``Pool.resume``. Not checkpoints: plain functions.
"""

from __future__ import annotations

import agentcore

from ._approvals import MAX_SHOWN_ARGUMENTS, MAX_STATE_BYTES
from ._errors import StateTooLarge
from ._inputs import Answer, ApprovalRequest, wire_size


def _shown(arguments: str) -> str:
    if len(arguments) <= MAX_SHOWN_ARGUMENTS:
        return arguments
    return f"{arguments[:MAX_SHOWN_ARGUMENTS]}... ({len(arguments)} characters in all)"


def encode_pause(state: agentcore.RunState) -> tuple[str, list[ApprovalRequest]]:
    """The paused ``state`` as JSON and its deferred calls, for the activity's result.

    Raises:
      StateTooLarge: the JSON and the call rows are over :data:`MAX_STATE_BYTES`.
    """
    text = state.to_json()
    calls = [ApprovalRequest(list(a.path), a.call_id, a.tool, _shown(a.arguments), a.reason)
             for a in state.pending_approvals]
    size = wire_size(text) + sum(  # as the activity's result carries them
        wire_size(c.call_id) + wire_size(c.tool) + wire_size(c.arguments)
        + wire_size(c.reason) + sum(wire_size(p) for p in c.path) + 64
        for c in calls)
    if size > MAX_STATE_BYTES:
        raise StateTooLarge(
            f"the paused run's state is {size} bytes, over the {MAX_STATE_BYTES} bytes "
            "a paused state may take on Temporal (Temporal refuses payloads over 2 MiB); "
            "it cannot wait for approval there: shorten the conversation "
            "(Spec.max_messages) or approve in-process"
        )
    return text, calls


def resumed_state(text: str, answers: list[Answer]) -> agentcore.RunState:
    """The paused state ``text`` with ``answers`` recorded, ready for ``Pool.resume``.

    Raises:
      agentcore.RunStateError: the text is not a state this version wrote (malformed,
        too large, edited), or an answer names no deferred call of it.
    """
    state = agentcore.RunState.from_json(text)
    for answer in answers:
        path = tuple(answer.path) if answer.path is not None else None
        if answer.approved:
            state.approve(answer.call_id, reason=answer.reason or "approved", by=answer.by,
                          path=path)
        else:
            state.deny(answer.call_id, answer.reason or "denied", by=answer.by, path=path)
    return state
