"""The pool's cancels through ``subagent._pool._scopes`` do what trio's own calls do.

A batch of cancels (``Canceller.add`` then ``flush``, as the pool cancels its runs)
does what one ``CancelScope.cancel()`` per scope does: each scope is cancelled, in
order, once; a parked task sees the Cancelled ``cancel()`` would give it; a deadline
in trio's heap leaves it; a nested scope and an enclosing cancel are recalculated as
trio does. ``exit_scope`` is the scope's ``__exit__``."""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing

from subagent._pool import _scopes


async def _parked(scope: trio.CancelScope, seen: list[str], name: str) -> None:
    with scope:
        try:
            await trio.sleep_forever()
        except trio.Cancelled as exc:
            seen.append(f"{name}: {exc}")
            raise


async def test_a_batch_cancels_as_cancel_would(
    autojump_clock: trio.testing.MockClock
) -> None:
    me = repr(trio.lowlevel.current_task())
    plain, timed, unentered = trio.CancelScope(), trio.CancelScope(), trio.CancelScope()
    timed.deadline = trio.current_time() + 10
    seen: list[str] = []

    async def nested(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # A task parked in a scope inside the batch's scope (its status has a child).
        with outer, trio.CancelScope():
            task_status.started()
            try:
                await trio.sleep_forever()
            except trio.Cancelled as exc:
                seen.append(f"nested: {exc}")
                raise

    outer = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_parked, plain, seen, "plain")
        nursery.start_soon(_parked, timed, seen, "timed")
        await nursery.start(nested)
        await trio.testing.wait_all_tasks_blocked()
        assert trio.lowlevel.current_statistics().seconds_to_next_deadline == 10
        canceller = _scopes.Canceller()
        for scope in (plain, timed, unentered, outer, plain):
            canceller.add(scope)
        assert not plain.cancel_called  # nothing before the flush
        canceller.flush()
        canceller.flush()  # an empty batch: nothing
        assert all(s.cancel_called for s in (plain, timed, unentered, outer))
        # The deadline left trio's heap: nothing is due any more.
        assert trio.lowlevel.current_statistics().seconds_to_next_deadline == math.inf
    text = f"cancelled due to explicit from task {me}"
    assert sorted(seen) == [f"nested: {text}", f"plain: {text}", f"timed: {text}"]
    assert trio.current_time() == 0  # no deadline fired
    assert plain.cancelled_caught and timed.cancelled_caught and outer.cancelled_caught
    # A scope cancelled by a batch and entered later is cancelled at once.
    with unentered:
        await trio.lowlevel.checkpoint()
    assert unentered.cancelled_caught


async def test_a_scope_under_a_cancel_is_cancelled_itself() -> None:
    # A scope effectively cancelled already (its enclosing scope was) is marked
    # cancelled by the batch: shielded from the enclosing cancel, it still cancels
    # its task, and it is the one that catches the Cancelled.
    inner = trio.CancelScope()
    with trio.CancelScope() as outer:
        outer.cancel()
        with inner:
            canceller = _scopes.Canceller()
            canceller.add(inner)
            canceller.flush()
            inner.shield = True
            await trio.lowlevel.checkpoint()
        assert inner.cancel_called and inner.cancelled_caught
    assert not outer.cancelled_caught


async def test_one_cancel_now() -> None:
    # Canceller.cancel: a batch of one, flushed at once.
    scope = trio.CancelScope()
    canceller = _scopes.Canceller()
    canceller.cancel(scope)
    assert scope.cancel_called


# -- exit_scope: a scope's __exit__ -------------------------------------------------


async def _raised(scope: trio.CancelScope, what: str) -> BaseException | None:
    # Enter ``scope`` by hand and return what its body raised: ``what`` says how.
    scope.__enter__()
    try:
        if what == "own-cancel":
            scope.cancel()
            await trio.lowlevel.checkpoint()
        elif what == "error":
            scope.cancel()
            raise ValueError("boom")
        elif what == "group":
            scope.cancel()
            try:
                await trio.lowlevel.checkpoint()
            except trio.Cancelled as exc:
                raise BaseExceptionGroup("both", [exc, ValueError("boom")]) from None
    except BaseException as exc:
        return exc
    return None


async def test_exit_scope_is_the_scopes_exit() -> None:
    # No exception: nothing goes on, and the task is back in the outer scope.
    with trio.CancelScope() as outer:
        scope = trio.CancelScope()
        assert await _raised(scope, "none") is None
        assert _scopes.exit_scope(scope, None) is True
        assert not scope.cancelled_caught
        outer.cancel()
        with pytest.raises(trio.Cancelled):
            await trio.lowlevel.checkpoint()
    # Its own cancel: caught.
    scope = trio.CancelScope()
    exc = await _raised(scope, "own-cancel")
    assert isinstance(exc, trio.Cancelled)
    assert _scopes.exit_scope(scope, exc) is True
    assert scope.cancelled_caught
    await trio.lowlevel.checkpoint()  # the task is not cancelled any more
    # Another exception: it goes on (False), not caught.
    scope = trio.CancelScope()
    exc = await _raised(scope, "error")
    assert isinstance(exc, ValueError)
    assert _scopes.exit_scope(scope, exc) is False
    assert not scope.cancelled_caught
    # A group: the Cancelled is caught, the rest raised.
    scope = trio.CancelScope()
    exc = await _raised(scope, "group")
    with pytest.raises(BaseExceptionGroup) as rest:
        _scopes.exit_scope(scope, exc)
    assert [repr(e) for e in rest.value.exceptions] == ["ValueError('boom')"]
    assert scope.cancelled_caught


async def test_exit_scope_leaves_an_enclosing_cancel_to_its_scope() -> None:
    with trio.CancelScope() as outer:
        inner = trio.CancelScope()
        inner.__enter__()
        try:
            outer.cancel()
            inner.cancel()
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            assert _scopes.exit_scope(inner, exc) is False
            assert not inner.cancelled_caught
            raise
    assert outer.cancelled_caught


async def test_exit_scope_takes_a_deadline_out_of_trios_heap(
    autojump_clock: trio.testing.MockClock
) -> None:
    scope = trio.CancelScope(deadline=trio.current_time() + 5)
    exc = await _raised(scope, "none")
    assert trio.lowlevel.current_statistics().seconds_to_next_deadline == 5
    assert _scopes.exit_scope(scope, exc) is True
    assert trio.lowlevel.current_statistics().seconds_to_next_deadline == math.inf
    await trio.sleep(10)
    assert not scope.cancelled_caught


async def test_exit_scope_of_a_shielded_scope_under_a_cancel() -> None:
    with trio.CancelScope() as outer:
        outer.cancel()
        # A shielded scope cancelled itself catches its own Cancelled, its parent's
        # cancel notwithstanding.
        inner = trio.CancelScope(shield=True)
        inner.__enter__()
        try:
            inner.cancel()
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            assert _scopes.exit_scope(inner, exc) is True
        assert inner.cancelled_caught
        # Leaving a shielded scope without an exception back into a cancelled one:
        # the next checkpoint is cancelled by the outer scope.
        quiet = trio.CancelScope(shield=True)
        quiet.__enter__()
        await trio.lowlevel.checkpoint()
        assert _scopes.exit_scope(quiet, None) is True
        with pytest.raises(trio.Cancelled):
            await trio.lowlevel.checkpoint()
    assert not outer.cancelled_caught
