"""A run cancelled from outside leaves no reference cycle (issue 17 item 4): its
Cancelled, with the traceback and the frames it holds, is freed by reference
counting as soon as the cancel scope that caught it lets go, not by the cycle
collector (``Run.run`` re-raises it without keeping it in a local)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
import trio
import trio.testing

from agentcore import Agent, EndReason, ModelRequest, ModelResponse, Run


class _Parked:
    """A model that parks until cancelled, keeping a weak reference to its Cancelled."""

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
    # The cycle collector off for the test: what dies, dies by reference counting.
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def test_a_cancelled_run_leaves_no_cycle(no_collector: None) -> None:
    model = _Parked()
    run: Run = Agent(model=model).new_run("go")
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run.run)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    assert run.summary is not None and run.summary.end_reason is EndReason.aborted
    assert len(model.refs) == 1
    assert model.refs[0]() is None


async def test_a_caught_cancel_is_the_same_exception(no_collector: None) -> None:
    # Re-raised as it was: the caller catches the very Cancelled the model saw.
    model = _Parked()
    run = Agent(model=model).new_run("go")
    caught: list[BaseException] = []

    async def runner() -> None:
        try:
            await run.run()
        except trio.Cancelled as exc:
            caught.append(exc)
            raise

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(runner)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert [model.refs[0]()] == caught
    caught.clear()
    assert model.refs[0]() is None
