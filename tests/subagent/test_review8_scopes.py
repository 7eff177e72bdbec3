"""An attacker's review of ``subagent._pool._scopes`` against trio's own cancel paths:
``exit_scope`` is ``CancelScope.__exit__`` in the misnesting trio recovers from (a
scope abandoned when an enclosing scope was exited out of order), and the pool ends
its tasks alike however the scope was exited."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentcore.testing import Blocked, ScriptedModel
from subagent import Defaults, Spec, TaskCancelled, open_pool
from subagent._pool import _scopes


async def test_exit_scope_of_a_scope_abandoned_by_misnesting() -> None:
    # A task's scope inside a nursery whose enclosing scope another task exited out of
    # order: trio cancels the abandoned subtree and the scope's __exit__ catches the
    # Cancelled that comes out of it (cancelled_caught), as exit_scope must.
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
async def test_a_pool_in_a_scope_exited_out_of_order_ends_its_runs_cancelled(
    idle_timeout: float | None,
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The caller exits a scope around the pool from inside it (misnesting): trio
    # cancels everything below that scope, and each run's scope catches the Cancelled
    # (it was abandoned). The run was cancelled, not timed out: no limit fired (the
    # pool said "was idle for 300s" at 0 s, and failed formatting an idle_timeout of
    # None without one), whichever way the scope was exited.
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
