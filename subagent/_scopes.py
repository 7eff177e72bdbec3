"""Cancelling many cancel scopes at once, as the pool cancels its tasks' runs.

``trio.CancelScope.cancel()`` formats the calling task's repr into the scope's cancel
reason on every call; cancelling a thousand runs formatted it a thousand times (about
a tenth of the pool's cost of cancelling them). A :class:`Canceller` formats it once,
on its first cancel, and gives every scope it cancels that same reason: what each
``trio.Cancelled`` says (its source, reason and cancelling task) is what ``cancel()``
would have made it say.

The shared reason is trio's private ``CancelReason``, set through the private
``CancelScope._cancel``; when this trio has neither (or they changed shape), every
cancel is the public ``cancel()``. Nothing here is a checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

try:  # trio's private API (trio >= 0.30); the fallback is the public cancel().
    from trio._core._run import CancelReason as _CancelReason
except ImportError:  # pragma: no cover (a trio without it)
    _CancelReason = None  # type: ignore[assignment,misc]


def _reason_factory() -> Callable[[str | None], Any] | None:
    # What makes the reason CancelScope.cancel() would give, or None if this trio's
    # private API is not the one this module knows.
    if _CancelReason is None or not callable(getattr(trio.CancelScope, "_cancel", None)):
        return None
    try:
        _CancelReason(source="explicit", source_task=None, reason=None)
    except TypeError:
        return None

    def make(task: str | None) -> Any:
        return _CancelReason(source="explicit", source_task=task, reason=None)

    return make


_make_reason = _reason_factory()


def _task_repr() -> str | None:
    # What cancel() names the cancelling task by (None outside a trio task).
    try:
        return repr(trio.lowlevel.current_task())
    except RuntimeError:
        return None


class Canceller:
    """Cancels scopes as ``scope.cancel()`` does, with one cancel reason shared by
    all of them (made on the first cancel, in the calling task). Use one per batch of
    cancels made by one task at one time; not a checkpoint."""

    __slots__ = ("_reason",)

    def __init__(self) -> None:
        self._reason: Any = None

    @trio.lowlevel.enable_ki_protection  # as CancelScope.cancel is
    def cancel(self, scope: trio.CancelScope) -> None:
        """Cancel ``scope`` (idempotent, like ``CancelScope.cancel``)."""
        make = _make_reason
        if make is None:
            scope.cancel()
            return
        reason = self._reason
        if reason is None:
            reason = self._reason = make(_task_repr())
        scope._cancel(reason)
