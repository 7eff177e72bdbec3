"""The ways ``subagent._scopes`` can cancel and exit scopes, for a test to run in each.

- ``inline``: as this trio allows (the inline steps on a checked release);
- ``private``: trio's own ``_cancel`` and ``__exit__`` (no inline steps);
- ``public``: ``cancel()`` and ``__exit__`` (a trio without the private API);
- ``before``: ``public``, each of the pool's cancels made at once, in the order of its
  effects (no batch made last): the pool before the batches.
"""

from __future__ import annotations

import pytest

from subagent import _scopes

MODES = ("inline", "private", "public")


def set_mode(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Make ``_scopes`` work in ``mode`` (one of MODES, or ``before``)."""
    if mode == "private":
        monkeypatch.setattr(_scopes, "_inline", False)
    elif mode in ("public", "before"):
        monkeypatch.setattr(_scopes, "_make_reason", None)
        monkeypatch.setattr(_scopes, "_inline", False)
    if mode == "before":
        monkeypatch.setattr(_scopes.Canceller, "add", _scopes.Canceller.cancel)
