"""Checks of the values a decoded ``RunState`` holds that its JSON schema cannot
express (see ``_statecodec``): a background child's mark, a tool's schema digest.
Each raises ``ValueError`` naming what is wrong (the codec turns it into a
``RunStateError``). Pure functions; not checkpoints."""

from __future__ import annotations

from ._pending import BackgroundChild


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
