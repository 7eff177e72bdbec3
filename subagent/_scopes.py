"""Cancelling many cancel scopes at once, as the pool cancels its tasks' runs.

``trio.CancelScope.cancel()`` formats the calling task's repr into the scope's cancel
reason on every call; cancelling a thousand runs formatted it a thousand times (about
a tenth of the pool's cost of cancelling them). A :class:`Canceller` formats it once,
on its first cancel, and gives every scope it cancels that same reason: what each
``trio.Cancelled`` says (its source, reason and cancelling task) is what ``cancel()``
would have made it say.

A Canceller also cancels a batch of scopes from one frame (:meth:`Canceller.add`, then
:meth:`Canceller.flush`). Each ``trio.Cancelled`` holds, through its traceback's
first frame and that frame's ``f_back`` chain (CPython links a returning frame object
to its caller's), every frame of the call that delivered it, kept alive (locals
included) until the run has unwound: one call per scope kept four frames per run more
than a nursery's cancel does (``Task._cancel_scopes``, ``Canceller.cancel``,
``CancelScope._cancel``, ``CancelStatus.recalculate``); a batch keeps trio's delivery
frames and this loop, shared by the batch, as a nursery's ``recalculate`` loop is.

:func:`exit_scope` exits a scope as its ``__exit__`` does, without the context manager
``CancelScope._close`` enters on every exit.

The shared reason is trio's private ``CancelReason``, set through the private
``CancelScope._cancel``; when this trio has neither (or they changed shape), every
cancel is the public ``cancel()``. A batch takes the steps of ``_cancel`` and of
``CancelStatus.recalculate`` inline for a scope in the common case (no nested scope),
and calls them otherwise; ``exit_scope`` likewise; a deadline leaves trio's heap by
trio's own context manager (checked against this trio's fields at import, and taken
only on the trio releases whose methods were read against these steps,
:data:`CHECKED_RELEASES`: else trio's own methods). Nothing here is a checkpoint.
"""

from __future__ import annotations

import math
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

# The private fields the inline steps read and write (trio 0.30 to 0.35 at least).
_SCOPE_FIELDS = (
    "_cancel_called", "_cancel_reason", "_registered_deadline", "_cancel_status", "_shield",
)
_STATUS_FIELDS = (
    "effectively_cancelled", "_children", "_tasks", "_parent", "abandoned_by_misnesting",
)


def _knows_fields() -> bool:
    # Whether this trio's CancelScope, CancelStatus and Task have the fields and the
    # methods the inline steps use (else every cancel of a batch goes through _cancel).
    try:
        from trio._core._run import CancelStatus
    except ImportError:  # pragma: no cover (a trio without it)
        return False
    status = {field.name for field in getattr(CancelStatus, "__attrs_attrs__", ())}
    scope = {field.name for field in getattr(trio.CancelScope, "__attrs_attrs__", ())}
    task = {field.name for field in getattr(trio.lowlevel.Task, "__attrs_attrs__", ())}
    return (
        all(name in scope for name in _SCOPE_FIELDS)
        and all(name in status for name in _STATUS_FIELDS)
        and "_cancel_status" in task
        and callable(getattr(trio.lowlevel.Task, "_attempt_delivery_of_any_pending_cancel", None))
        and callable(getattr(CancelStatus, "close", None))
        and callable(getattr(CancelStatus, "recalculate", None))
        and callable(getattr(trio.CancelScope, "_might_change_registered_deadline", None))
    )


#: The trio releases whose CancelScope._cancel/_close, CancelStatus.recalculate/close
#: and Task._attempt_delivery_of_any_pending_cancel were read against the inline
#: steps (0.31.0, the first with the fields, to 0.35.0). On any other release the
#: inline steps are off and every cancel and exit is trio's own: a release that keeps
#: the names but changes what those methods do would not be caught by _knows_fields.
#: Widen it after reading the new release's methods against the steps here.
CHECKED_RELEASES = ((0, 31), (0, 35))


def _checked_release(version: str) -> bool:
    # Whether trio's version (major.minor, whatever follows) is in CHECKED_RELEASES.
    parts = version.split(".")
    try:
        release = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        return False
    first, last = CHECKED_RELEASES
    return first <= release <= last


_inline = (
    _make_reason is not None and _knows_fields() and _checked_release(trio.__version__)
)


def _task_repr() -> str | None:
    # What cancel() names the cancelling task by (None outside a trio task).
    try:
        return repr(trio.lowlevel.current_task())
    except RuntimeError:
        return None


class Canceller:
    """Cancels scopes as ``scope.cancel()`` does, with one cancel reason shared by
    all of them (made on the first cancel, in the calling task): at once
    (:meth:`cancel`), or a batch from one frame (:meth:`add`, then :meth:`flush`). Use
    one per batch of cancels made by one task at one time; not a checkpoint."""

    __slots__ = ("_batch", "_reason")

    def __init__(self) -> None:
        self._reason: Any = None
        self._batch: list[trio.CancelScope] = []

    def cancel(self, scope: trio.CancelScope) -> None:
        """Cancel ``scope`` now (idempotent, like ``CancelScope.cancel``)."""
        self._batch.append(scope)
        self.flush()

    def add(self, scope: trio.CancelScope) -> None:
        """Cancel ``scope`` at the next :meth:`flush`."""
        self._batch.append(scope)

    @trio.lowlevel.enable_ki_protection  # as CancelScope.cancel is
    def flush(self) -> None:
        """Cancel the scopes added since the last flush, in order (idempotent, like
        ``CancelScope.cancel``)."""
        batch = self._batch
        if not batch:
            return
        self._batch = []
        if _make_reason is None:
            for scope in batch:
                scope.cancel()
            return
        reason = self._reason
        if reason is None:
            reason = self._reason = _make_reason(_task_repr())
        if not _inline:
            for scope in batch:
                scope._cancel(reason)
            return
        inf = math.inf
        for scope in batch:
            if scope._cancel_called:
                continue
            # CancelScope._cancel ...
            if scope._cancel_reason is None:
                scope._cancel_reason = reason
            if scope._registered_deadline != inf:
                # (its deadline leaves trio's heap by trio's own step)
                with scope._might_change_registered_deadline():
                    scope._cancel_called = True
            else:
                scope._cancel_called = True
            status = scope._cancel_status
            if status is None or status.effectively_cancelled:
                continue
            if status._children:
                status.recalculate()
                continue
            # ... and CancelStatus.recalculate for a status with no child.
            status.effectively_cancelled = True
            for task in status._tasks:
                task._attempt_delivery_of_any_pending_cancel()


@trio.lowlevel.enable_ki_protection  # as CancelScope.__exit__ is
def exit_scope(scope: trio.CancelScope, exc: BaseException | None) -> bool:
    """Exit ``scope``, entered by the calling task, with ``exc`` (the exception being
    handled, or None) as its ``__exit__`` does; True when nothing goes on (it caught
    ``exc``, or there was none). Raises what ``__exit__`` raises.

    Inline for a scope exited in order with an exception that is not a group (a
    cancelled run's way out, and a run's): the steps of ``CancelScope._close`` (and of
    the ``Task`` and ``CancelStatus`` methods it calls), and its context manager only
    for a deadline in trio's heap. Otherwise ``__exit__`` itself. Not a checkpoint.
    """
    status = scope._cancel_status
    if not _inline or status is None or isinstance(exc, BaseExceptionGroup):
        return _exit(scope, exc)
    task = trio.lowlevel.current_task()
    parent = status._parent
    if task._cancel_status is not status or parent is None or status.abandoned_by_misnesting:
        # Misnested (__exit__ says so), trio's own root, or left by an enclosing scope
        # exited out of order (__exit__ catches any Cancelled then).
        return _exit(scope, exc)
    # Task._activate_cancel_status(parent) ...
    status._tasks.remove(task)
    task._cancel_status = parent
    parent._tasks.add(task)
    if parent.effectively_cancelled:
        task._attempt_delivery_of_any_pending_cancel()
    # ... the Cancelled is the scope's unless its parent's cancel reaches it
    # (CancelStatus.parent_cancellation_is_visible_to_us) ...
    if (
        exc is not None
        and status.effectively_cancelled
        and (scope._shield or not parent.effectively_cancelled)
        and isinstance(exc, trio.Cancelled)
    ):
        scope.cancelled_caught = True
        exc = None
    # ... and CancelStatus.close(): unlinked from its parent (its recovery from a
    # misnesting when tasks or children are left in it).
    parent._children.remove(status)
    status._parent = None
    if status._tasks or status._children:
        status.close()
    if scope._registered_deadline != math.inf:
        # (its deadline leaves trio's heap by trio's own step)
        with scope._might_change_registered_deadline():
            scope._cancel_status = None
    else:
        scope._cancel_status = None
    return exc is None


def _exit(scope: trio.CancelScope, exc: BaseException | None) -> bool:
    if exc is None:
        return bool(scope.__exit__(None, None, None))
    return bool(scope.__exit__(type(exc), exc, exc.__traceback__))
