"""Idempotency keys of tool calls: what ``current_tool_call()`` gives a tool so that a
call to an outside API that takes one (payment APIs do) is not done twice when the
tool call itself runs again: after a crash (a call in flight at the crash that is
declared idempotent runs again on recovery), or when a tool retries its own request.

A call's key is the hex SHA-256 of its run's *nonce* (128 random bits made when the
run's first tool call starts, stored with the run's state: ``RunState.nonce``), its
run id and its call id. It is the same for that call across retries, pause and
resume (the state's JSON) and recovery from checkpoints (each row holds the nonce),
and differs between calls, and between runs, even of the same run id in two
processes. A state stored before nonces existed has none: its calls' keys are then
derived from the run id and call id alone.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import TYPE_CHECKING

import attrs

from .._messages import ToolCall

if TYPE_CHECKING:
    from ._state import RunState


@attrs.frozen(slots=True)
class CurrentToolCall(ToolCall):
    """The :class:`ToolCall` whose tool runs, as ``current_tool_call()`` gives it, with
    its :attr:`idempotency_key` (computed when read: a call that does not read it
    does not pay for the hash)."""

    nonce: str = attrs.field(default="", kw_only=True, repr=False)
    """The run's nonce (``RunState.nonce``)."""
    run_id: str = attrs.field(default="", kw_only=True)
    """The run's id."""

    @property
    def idempotency_key(self) -> str:
        """64 hex digits, stable for this call of this run (see the module docstring):
        pass it to an outside API as its idempotency key."""
        return idempotency_key(self.nonce, self.run_id, self.id)


def ensure_nonce(state: RunState) -> str:
    """The nonce of the run whose ``state`` it is, made (128 random bits, hex) if it
    has none yet. Not a checkpoint."""
    if not state.nonce:
        state.nonce = secrets.token_hex(16)
    return state.nonce


def idempotency_key(nonce: str, run_id: str, call_id: str) -> str:
    """The key of call ``call_id`` of the run ``run_id`` whose nonce is ``nonce``."""
    digest = hashlib.sha256()
    for part in (nonce, run_id, call_id):
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()
