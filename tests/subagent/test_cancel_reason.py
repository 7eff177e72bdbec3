"""The cancels of a pool's runs share one cancel reason (``subagent._scopes``, issue
17 item 4): each run sees the ``trio.Cancelled`` that ``CancelScope.cancel()`` would
have given it (source ``explicit``, no reason, the cancelling task's repr), and its
audit entries name the source only, with trio's private API and without it."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentcore import ModelRequest, ModelResponse
from ledger import MemorySink
from subagent import Defaults, Spec, TaskCancelled, _scopes, open_pool


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


@pytest.mark.parametrize("private", [True, False], ids=["shared-reason", "public-cancel"])
@pytest.mark.parametrize("cancel_all", [True, False], ids=["pool-cancel", "task-cancel"])
async def test_a_cancelled_run_sees_what_cancel_would_say(
    private: bool, cancel_all: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not private:
        monkeypatch.setattr(_scopes, "_make_reason", None)
    seen, aborts, me = await _cancel_three(cancel_all)
    text = f"cancelled due to explicit from task {me}"
    assert seen == [(text, "explicit", None, me)] * 3
    # The audit trail names the source only, never a task's repr (a memory address).
    assert aborts == ["Cancelled: cancelled due to explicit"] * 3


async def test_one_reason_is_formatted_once_per_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    # The task's repr is formatted on the batch's first cancel only.
    calls: list[str | None] = []
    task_repr = _scopes._task_repr

    def counted() -> str | None:
        calls.append(text := task_repr())
        return text

    monkeypatch.setattr(_scopes, "_task_repr", counted)
    scopes = [trio.CancelScope() for _ in range(4)]
    canceller = _scopes.Canceller()
    assert calls == []
    for scope in scopes:
        canceller.cancel(scope)
    canceller.cancel(scopes[0])  # idempotent, as cancel() is
    assert calls == [repr(trio.lowlevel.current_task())]
    assert all(scope.cancel_called for scope in scopes)
    with scopes[2], pytest.raises(trio.Cancelled) as caught:
        await trio.lowlevel.checkpoint()
    assert str(caught.value) == f"cancelled due to explicit from task {calls[0]}"


def test_the_public_cancel_when_trios_private_api_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No CancelReason, a CancelReason of another shape, no CancelScope._cancel: each
    # leaves the public cancel() (_make_reason None); this trio's is the shared reason.
    assert _scopes._make_reason is not None
    monkeypatch.setattr(_scopes, "_CancelReason", None)
    assert _scopes._reason_factory() is None

    class Other:
        def __init__(self, why: str) -> None:
            self.why = why

    monkeypatch.setattr(_scopes, "_CancelReason", Other)
    assert _scopes._reason_factory() is None
    monkeypatch.undo()
    monkeypatch.delattr(trio.CancelScope, "_cancel")
    assert _scopes._reason_factory() is None
    monkeypatch.undo()
    assert _scopes._reason_factory() is not None
    # Outside a trio task (cancel() names no task then either).
    scope = trio.CancelScope()
    _scopes.Canceller().cancel(scope)
    assert scope.cancel_called
