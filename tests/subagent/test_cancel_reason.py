"""The cancels of a pool's runs (``subagent._pool._scopes``): each run sees the
``trio.Cancelled`` that ``CancelScope.cancel()`` gives it (source ``explicit``, no
reason, the cancelling task's repr), and its abort entry names who cancelled it in
words of ours (``CANCEL_TEXTS``), never a task's repr."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentcore import ModelRequest, ModelResponse
from ledger import MemorySink
from subagent import Defaults, Spec, TaskCancelled, open_pool
from subagent._pool import _scopes


class _Seen:
    """A model that parks until cancelled and keeps what its Cancelled says."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, object, object, object]] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            await trio.sleep_forever()
        except trio.Cancelled as exc:
            self.seen.append((str(exc), exc.source, exc.reason, exc.source_task))
            raise
        raise AssertionError("unreachable")


async def _cancel_three(cancel_all: bool) -> tuple[list[tuple[str, object, object, object]],
                                                   list[str | None], str]:
    # Three runs parked in their model call, cancelled by pool.cancel() (cancel_all)
    # or one Task.cancel() each; returns what they saw, their abort entries' errors
    # and the repr of the task that cancelled them.
    model = _Seen()
    audit = MemorySink()
    async with open_pool(defaults=Defaults(model=model, audit=audit)) as pool:
        pool.register(Spec("a"))
        tasks = [await pool.submit("a", f"go {i}") for i in range(3)]
        await trio.testing.wait_all_tasks_blocked()
        me = repr(trio.lowlevel.current_task())
        if cancel_all:
            pool.cancel()
        else:
            for task in tasks:
                task.cancel()
        for task in tasks:
            with pytest.raises(TaskCancelled):
                await task.wait()
    aborts = [e.error for e in audit.entries if e.kind == "abort"]
    return model.seen, aborts, me


@pytest.mark.parametrize("cancel_all", [True, False], ids=["pool-cancel", "task-cancel"])
async def test_a_cancelled_run_sees_what_cancel_would_say(cancel_all: bool) -> None:
    seen, aborts, me = await _cancel_three(cancel_all)
    text = f"cancelled due to explicit from task {me}"
    assert seen == [(text, "explicit", None, me)] * 3
    # The audit trail names the cause, never a task's repr (a memory address).
    cause = "pool_closed): the pool was cancelled" if cancel_all else (
        "caller): Task.cancel() of it or of a task above it")
    assert aborts == [f"cancelled ({cause}"] * 3


def test_a_canceller_outside_a_trio_task() -> None:
    # Outside a trio task (cancel() names no task then either).
    scope = trio.CancelScope()
    _scopes.Canceller().cancel(scope)
    assert scope.cancel_called
