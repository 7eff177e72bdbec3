"""The same pool scenarios driven from trio (``trio.run``) and from asyncio
(``asyncio.run`` through ``subagent.aio``): a scenario is written once against a
:class:`Driver` and runs under each."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

import subagent
import subagent.aio
from agentcore import Message, ModelRequest, ModelResponse


class GateModel:
    """A model whose calls wait until :meth:`release` (or answer at once once
    released), answering ``"done <input>"``; records the calls running at once."""

    def __init__(self) -> None:
        self.active = 0
        self.max_active = 0
        self.calls = 0
        self.released = trio.Event()

    def release(self) -> None:
        self.released.set()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await self.released.wait()
        finally:
            self.active -= 1
        return ModelResponse(Message("assistant", f"done {request.messages[-1].content}"))


class Driver:
    """How a scenario reaches the pool: ``open_pool``, streams, background work,
    waiting until everything is blocked, and a synchronous call that wakes trio."""

    name = ""

    def run(self, scenario: Callable[[Driver], Awaitable[None]]) -> None:
        raise NotImplementedError

    def open_pool(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    def stream(self, buffer: int) -> Any:
        raise NotImplementedError

    def group(self) -> Any:
        raise NotImplementedError

    async def settle(self) -> None:
        raise NotImplementedError

    def sync(self, fn: Callable[[], object]) -> None:
        raise NotImplementedError

    async def cancelled_wait(self, task: Any) -> None:
        """Start ``task.wait()`` in the background, then cancel that wait alone."""
        raise NotImplementedError


class TrioDriver(Driver):
    name = "trio"

    def run(self, scenario: Callable[[Driver], Awaitable[None]]) -> None:
        async def main() -> None:
            await scenario(self)

        trio.run(main)

    def open_pool(self, **kwargs: Any) -> Any:
        return subagent.open_pool(**kwargs)

    def stream(self, buffer: int) -> Any:
        return subagent.Stream(buffer)

    @asynccontextmanager
    async def group(self) -> AsyncIterator[Any]:
        async with trio.open_nursery() as nursery:
            yield nursery

    async def settle(self) -> None:
        await trio.testing.wait_all_tasks_blocked()

    def sync(self, fn: Callable[[], object]) -> None:
        fn()

    async def cancelled_wait(self, task: Any) -> None:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(task.wait)
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()


class _TaskGroup:
    # asyncio.TaskGroup with trio's spelling of start_soon.
    def __init__(self, group: asyncio.TaskGroup) -> None:
        self._group = group

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, object]], *args: Any) -> None:
        self._group.create_task(fn(*args))


class AsyncioDriver(Driver):
    name = "asyncio"

    def run(self, scenario: Callable[[Driver], Awaitable[None]]) -> None:
        async def main() -> None:
            await scenario(self)

        asyncio.run(main())

    def open_pool(self, **kwargs: Any) -> Any:
        return subagent.aio.open_pool(**kwargs)

    def stream(self, buffer: int) -> Any:
        return subagent.aio.Stream(buffer)

    @asynccontextmanager
    async def group(self) -> AsyncIterator[Any]:
        async with asyncio.TaskGroup() as group:
            yield _TaskGroup(group)

    async def settle(self) -> None:
        # Everything is blocked once the trio side is and the asyncio side has
        # nothing left to run; each may wake the other, so until both hold twice.
        host = subagent.aio._host.current_host()
        assert host is not None
        for _ in range(3):
            await host.call(trio.testing.wait_all_tasks_blocked)
            for _ in range(10):
                await asyncio.sleep(0)

    def sync(self, fn: Callable[[], object]) -> None:
        fn()

    async def cancelled_wait(self, task: Any) -> None:
        waiting = asyncio.ensure_future(task.wait())
        await self.settle()
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting


DRIVERS = [TrioDriver(), AsyncioDriver()]
