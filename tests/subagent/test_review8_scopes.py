"""An attacker's review of ``subagent._scopes`` against trio's own cancel paths:
``exit_scope`` is ``CancelScope.__exit__`` in the misnesting trio recovers from (a
scope abandoned when an enclosing scope was exited out of order), and the pool ends
its tasks alike however the scope was exited; ``Canceller.flush`` and ``exit_scope``
run protected from KeyboardInterrupt as ``cancel()`` and ``__exit__`` do."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentcore.testing import Blocked, ScriptedModel
from subagent import Defaults, Spec, TaskCancelled, _scopes, open_pool
from tests.subagent._scope_modes import MODES, set_mode


@pytest.mark.parametrize("mode", MODES)
async def test_exit_scope_of_a_scope_abandoned_by_misnesting(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A task's scope inside a nursery whose enclosing scope another task exited out of
    # order: trio cancels the abandoned subtree and the scope's __exit__ catches the
    # Cancelled that comes out of it (cancelled_caught), as exit_scope must.
    set_mode(monkeypatch, mode)
    seen: dict[str, object] = {}

    async def child(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        inner = trio.CancelScope()
        inner.__enter__()
        task_status.started()
        try:
            await trio.sleep_forever()
        except trio.Cancelled as exc:
            seen["caught"] = _scopes.exit_scope(inner, exc)
            seen["cancelled_caught"] = inner.cancelled_caught
            if not seen["caught"]:
                raise

    outer = trio.CancelScope()
    outer.__enter__()
    async with trio.open_nursery() as nursery:
        await nursery.start(child)
        with pytest.raises(RuntimeError, match="that's still within its child"):
            outer.__exit__(None, None, None)
    assert seen == {"caught": True, "cancelled_caught": True}


@pytest.mark.parametrize("idle_timeout", [None, 300.0], ids=["no-limit", "idle-limit"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_pool_in_a_scope_exited_out_of_order_ends_its_runs_cancelled(
    mode: str, idle_timeout: float | None, monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The caller exits a scope around the pool from inside it (misnesting): trio
    # cancels everything below that scope, and each run's scope catches the Cancelled
    # (it was abandoned). The run was cancelled, not timed out: no limit fired (the
    # pool said "was idle for 300s" at 0 s, and failed formatting an idle_timeout of
    # None without one), whichever way the scope was exited.
    set_mode(monkeypatch, mode)
    model = ScriptedModel([Blocked("never")])
    outer = trio.CancelScope()
    outer.__enter__()
    async with open_pool(defaults=Defaults(model=model)) as pool:
        pool.register(Spec("a", idle_timeout=idle_timeout))
        task = await pool.submit("a", "go")
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RuntimeError, match="that's still within its child"):
            outer.__exit__(None, None, None)
    with pytest.raises(TaskCancelled, match=r"^task a/0001 was cancelled$"):
        await task.wait()
    assert str(task.status) == "cancelled"
    assert trio.current_time() == 0


@pytest.mark.parametrize("mode", MODES)
async def test_exit_scope_runs_protected_from_keyboard_interrupt(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As __exit__ is: a KeyboardInterrupt may not land between its steps (the task
    # half moved to the parent status). Seen from trio.lowlevel.current_task, which
    # the inline steps call first.
    set_mode(monkeypatch, mode)
    protected: list[bool] = []
    current = trio.lowlevel.current_task

    def watched() -> trio.lowlevel.Task:
        protected.append(trio.lowlevel.currently_ki_protected())
        return current()

    for cancel in (False, True):
        scope = trio.CancelScope(deadline=trio.current_time() + 10)
        scope.__enter__()
        try:
            if cancel:
                scope.cancel()
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            with monkeypatch.context() as watch:
                watch.setattr(trio.lowlevel, "current_task", watched)
                assert _scopes.exit_scope(scope, exc) is True
        else:
            with monkeypatch.context() as watch:
                watch.setattr(trio.lowlevel, "current_task", watched)
                assert _scopes.exit_scope(scope, None) is True
    # (__exit__ reads trio's current task its own way: nothing to see without inline.)
    assert protected == ([True, True] if mode == "inline" else [])
    assert not trio.lowlevel.currently_ki_protected()


_FIELDS = [
    ("scope", name) for name in (
        "_cancel_called", "_cancel_reason", "_registered_deadline", "_cancel_status", "_shield",
    )
] + [
    ("status", name) for name in (
        "effectively_cancelled", "_children", "_tasks", "_parent", "abandoned_by_misnesting",
    )
] + [("task", "_cancel_status")]
_METHODS = [
    ("task", "_attempt_delivery_of_any_pending_cancel"),
    ("status", "close"),
    ("status", "recalculate"),
    ("scope", "_might_change_registered_deadline"),
]


def _classes() -> dict[str, type]:
    from trio._core._run import CancelStatus

    return {"scope": trio.CancelScope, "status": CancelStatus, "task": trio.lowlevel.Task}


@pytest.mark.parametrize(("owner", "name"), _FIELDS + _METHODS)
def test_the_inline_steps_need_every_private_name_they_use(
    owner: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A trio without one of the private fields or methods the inline steps read,
    # write or call leaves every cancel and exit to trio's own methods (_inline off),
    # rather than failing with an AttributeError in a batch or an exit.
    assert _scopes._knows_fields()
    cls = _classes()[owner]
    if (owner, name) in _FIELDS:
        kept = tuple(f for f in cls.__attrs_attrs__ if f.name != name)  # type: ignore[attr-defined]
        monkeypatch.setattr(cls, "__attrs_attrs__", kept)
    else:
        monkeypatch.delattr(cls, name)
    assert not _scopes._knows_fields()


@pytest.mark.parametrize(("version", "checked"), [
    ("0.31.0", True), ("0.33.1", True), ("0.35.0", True), ("0.35.0+dev", True),
    ("0.30.0", False), ("0.36.0", False), ("1.0.0", False), ("0.27.0", False),
    ("0.x", False), ("", False),
])
def test_the_inline_steps_run_only_on_the_trio_releases_read_against_them(
    version: str, checked: bool
) -> None:
    # A release that keeps the private names but changes what the methods do is not
    # caught by _knows_fields: the inline steps are off on any release not read.
    assert _scopes._checked_release(version) is checked


def test_this_trio_takes_the_inline_steps_if_it_is_a_checked_release() -> None:
    assert _scopes._inline is (
        _scopes._knows_fields() and _scopes._checked_release(trio.__version__)
    )
