"""Cancelling a batch of cancel scopes, as the pool cancels its tasks' runs.

The pool's shell (:meth:`subagent.Pool._apply`) carries out a list of the core's
effects; the cancels among them are made last, in order, after every other effect
(a run woken by a grant and cancelled by the same step sees both). A
:class:`Canceller` collects them (:meth:`Canceller.add`) and makes them
(:meth:`Canceller.flush`) with trio's public ``CancelScope.cancel()``: what each
``trio.Cancelled`` says is what ``cancel()`` makes it say.

:func:`exit_scope` exits a scope entered by hand (a task's scope is entered and
exited without a with-block, see ``subagent._pool._lifecycle``) through its ``__exit__``.

Only trio's public API is used here: earlier releases took the steps of trio's private
cancel machinery inline for speed (W3 1.70x bare trio against 2.5x); a trio release
can change those without notice (issue 34). Nothing here is a checkpoint.
"""

from __future__ import annotations

import trio


class Canceller:
    """Cancels scopes as ``scope.cancel()`` does: at once (:meth:`cancel`), or a batch
    in order (:meth:`add`, then :meth:`flush`). Not a checkpoint."""

    __slots__ = ("_batch",)

    def __init__(self) -> None:
        self._batch: list[trio.CancelScope] = []

    def cancel(self, scope: trio.CancelScope) -> None:
        """Cancel ``scope`` now (idempotent, like ``CancelScope.cancel``)."""
        scope.cancel()

    def add(self, scope: trio.CancelScope) -> None:
        """Cancel ``scope`` at the next :meth:`flush`."""
        self._batch.append(scope)

    def flush(self) -> None:
        """Cancel the scopes added since the last flush, in order (idempotent, like
        ``CancelScope.cancel``)."""
        batch = self._batch
        self._batch = []
        for scope in batch:
            scope.cancel()


def exit_scope(scope: trio.CancelScope, exc: BaseException | None) -> bool:
    """Exit ``scope``, entered by the calling task, with ``exc`` (the exception being
    handled, or None) through its ``__exit__``; True when nothing goes on (it caught
    ``exc``, or there was none). Raises what ``__exit__`` raises. Not a checkpoint."""
    if exc is None:
        return bool(scope.__exit__(None, None, None))
    return bool(scope.__exit__(type(exc), exc, exc.__traceback__))
