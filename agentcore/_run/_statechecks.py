"""Checks of the values a ``RunState`` holds that its JSON schema cannot express (see
``_run._codec``): a background child's mark, a tool's schema digest (decoding: each
raises ``ValueError`` naming what is wrong, which the codec turns into a
``RunStateError``), and the steering a state may store. Pure functions; not
checkpoints."""

from __future__ import annotations

from collections.abc import Sequence

from .._errors import RunStateError
from ._pending import BackgroundChild

#: The most steering messages waiting in a run's inbox that a state holds (a
#: checkpoint taken while they wait stores them; more cannot be stored).
MAX_STATE_STEERING = 1000


def steering_to_store(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, unless there are more than a state may hold (then
    ``RunStateError``: the state cannot be stored)."""
    if len(texts) > MAX_STATE_STEERING:
        raise RunStateError(
            f"more than {MAX_STATE_STEERING} steering messages wait in the run's inbox "
            "(MAX_STATE_STEERING): its state cannot be stored"
        )
    return list(texts)


def check_schema(digest: str) -> str:
    """``digest`` if it is empty or ``sha256:`` and 64 lowercase hex digits."""
    if digest and not (len(digest) == 71 and digest.startswith("sha256:")
                       and all(c in "0123456789abcdef" for c in digest[7:])):
        raise ValueError("a pending call's schema digest is not sha256: and 64 hex digits")
    return digest


def check_mark(mark: BackgroundChild, paused: bool) -> None:
    """Raise unless ``mark`` fits the state it marks (``paused``: that state is)."""
    if mark.result is None:
        if mark.output is not None or mark.error is not None:
            raise ValueError("a background child with an output or an error needs its result")
        if not paused:
            raise ValueError("a background child that has not ended must be paused")
        return
    if (mark.output is None) == (mark.error is None):
        raise ValueError("an ended background child has exactly one of output and error")
    if paused:
        raise ValueError("an ended background child cannot be paused")
