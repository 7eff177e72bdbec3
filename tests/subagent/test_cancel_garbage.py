"""Cancelling a pool's runs leaves no reference cycle of their exceptions (issue 17
item 4): each run's Cancelled, its traceback and frames are freed by reference
counting when the task's scope catches it, with the cycle collector off."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
import trio
import trio.testing

from agentcore import ModelRequest, ModelResponse
from subagent import Defaults, Spec, TaskCancelled, TaskStatus, open_pool


class _Parked:
    """A model that parks until cancelled, keeping weak references to its Cancelled."""

    def __init__(self) -> None:
        self.refs: list[weakref.ref[BaseException]] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            await trio.sleep_forever()
        except trio.Cancelled as exc:
            self.refs.append(weakref.ref(exc))
            raise
        raise AssertionError("unreachable")


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize("cancel_all", [True, False], ids=["pool-cancel", "task-cancel"])
async def test_cancelled_runs_leave_no_cycle(no_collector: None, cancel_all: bool) -> None:
    model = _Parked()
    async with open_pool(defaults=Defaults(model=model)) as pool:
        pool.register(Spec("a"))
        tasks = [await pool.submit("a", f"go {i}") for i in range(5)]
        await trio.testing.wait_all_tasks_blocked()
        if cancel_all:
            pool.cancel()
        else:
            for task in tasks:
                task.cancel()
        for task in tasks:
            with pytest.raises(TaskCancelled):
                await task.wait()
        assert [task.status for task in tasks] == [TaskStatus.cancelled] * 5
        assert len(model.refs) == 5
        assert [ref() for ref in model.refs] == [None] * 5
