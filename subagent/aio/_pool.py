"""The pool and task proxies, and :func:`open_pool`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

import agentcore
import subagent

from ._host import Host, enter_host, leave_host, unless_cancelled
from ._stream import Stream, trio_stream

__all__ = ["AioPool", "AioTask", "open_pool"]


class AioTask:
    """A :class:`subagent.Task` seen from asyncio (its ``task``): the same attributes,
    with :meth:`wait` awaitable from asyncio."""

    def __init__(self, host: Host, task: subagent.Task) -> None:
        self._host = host
        self.task = task

    def __repr__(self) -> str:
        return f"<subagent.aio.AioTask of {self.task!r}>"

    @property
    def path(self) -> tuple[str, ...]:
        """The task's AgentPath."""
        return self.task.path

    @property
    def name(self) -> str:
        """The spec it runs."""
        return self.task.name

    @property
    def status(self) -> subagent.TaskStatus:
        """Its status now."""
        return self.task.status

    @property
    def children(self) -> list[AioTask]:
        """Its live and ended subagent tasks."""
        return [AioTask(self._host, child) for child in self.task.children]

    @property
    def tree_usage(self) -> agentcore.Usage:
        """See :attr:`subagent.Task.tree_usage`."""
        return self.task.tree_usage

    @property
    def done(self) -> bool:
        """Whether it has resolved."""
        return self.task.done

    async def wait(self) -> subagent.Result:
        """Wait for its Result (see :meth:`subagent.Task.wait`, same exceptions).
        Cancelling the waiting asyncio task does not cancel this task."""
        return await self._host.call(self.task.wait)

    def cancel(self) -> None:
        """Cancel it (see :meth:`subagent.Task.cancel`); it acts at once."""
        self.task.cancel()

    def interrupt(self) -> None:
        """See :meth:`subagent.Task.interrupt`."""
        self.task.interrupt()

    def steer(self, text: str) -> None:
        """See :meth:`subagent.Task.steer`."""
        self.task.steer(text)

    def follow_up(self, text: str) -> None:
        """See :meth:`subagent.Task.follow_up`."""
        self.task.follow_up(text)


class AioPool:
    """A :class:`subagent.Pool` seen from asyncio (its ``pool``); from
    :func:`open_pool`."""

    def __init__(self, host: Host, pool: subagent.Pool) -> None:
        self._host = host
        self.pool = pool

    def __repr__(self) -> str:
        return f"<subagent.aio.AioPool of {self.pool!r}>"

    @property
    def specs(self) -> dict[str, subagent.Spec]:
        """The registered specs by name."""
        return self.pool.specs

    def register(self, spec: subagent.Spec) -> None:
        """Register a spec (see :meth:`subagent.Pool.register`)."""
        self.pool.register(spec)

    def mcp_tools(self, server: str, *names: str) -> tuple[agentcore.Tool, ...]:
        """See :meth:`subagent.Pool.mcp_tools`."""
        return self.pool.mcp_tools(server, *names)

    def statistics(self) -> subagent.PoolStatistics:
        """A snapshot of the pool (see :meth:`subagent.Pool.statistics`)."""
        return self.pool.statistics()

    async def submit(self, name: str, input: str, *, parent_path: tuple[str, ...] = (),
                     events: Stream | subagent.Stream | None = None,
                     history: Iterable[agentcore.Message] = ()) -> AioTask:
        """Queue a run (see :meth:`subagent.Pool.submit`, same exceptions)."""
        task = await self._host.call(self.pool.submit, name, input, parent_path=parent_path,
                                     events=trio_stream(events), history=history)
        return AioTask(self._host, task)

    def submit_nowait(self, name: str, input: str, *, parent_path: tuple[str, ...] = (),
                      events: Stream | subagent.Stream | None = None,
                      history: Iterable[agentcore.Message] = ()) -> AioTask:
        """See :meth:`subagent.Pool.submit_nowait`."""
        task = self.pool.submit_nowait(name, input, parent_path=parent_path,
                                       events=trio_stream(events), history=history)
        return AioTask(self._host, task)

    async def resume(self, state: agentcore.RunState, *, name: str | None = None,
                     events: Stream | subagent.Stream | None = None) -> AioTask:
        """See :meth:`subagent.Pool.resume`."""
        task = await self._host.call(self.pool.resume, state, name=name,
                                     events=trio_stream(events))
        return AioTask(self._host, task)

    async def recover(self) -> subagent.Recovered:
        """See :meth:`subagent.Pool.recover` (its tasks are trio tasks: wrap one in
        :class:`AioTask` with :meth:`task` to wait for it from asyncio)."""
        return await self._host.call(self.pool.recover)

    def task(self, task: subagent.Task) -> AioTask:
        """The asyncio view of a task of this pool."""
        return AioTask(self._host, task)

    def close(self) -> None:
        """See :meth:`subagent.Pool.close`."""
        self.pool.close()

    def cancel(self) -> None:
        """See :meth:`subagent.Pool.cancel`."""
        self.pool.cancel()


class _Opened:
    # One pool's life in the guest run: opened, told to leave (cancelling first if
    # the asyncio block raised), and its close's outcome.
    def __init__(self, host: Host) -> None:
        self.leave = trio.Event()
        self.cancel = False
        self.closed: asyncio.Future[BaseException | None] = host.loop.create_future()

    async def run(self, kwargs: Mapping[str, Any], task_status: Any) -> None:
        started = False
        try:
            async with subagent.open_pool(**kwargs) as pool:
                task_status.started(pool)
                started = True
                await self.leave.wait()
                if self.cancel:
                    pool.cancel()
        except BaseException as exc:
            if not started:
                raise
            if not self.closed.done():
                self.closed.set_result(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            if not self.closed.done():
                self.closed.set_result(None)


@asynccontextmanager
async def open_pool(*, events: Stream | subagent.Stream | None = None,
                    **kwargs: Any) -> AsyncIterator[AioPool]:
    """Open a :class:`subagent.Pool` from asyncio code: ``async with
    subagent.aio.open_pool(...) as pool``. The arguments are
    :func:`subagent.open_pool`'s (``events`` may be a :class:`Stream`).

    The pool runs in this thread's trio guest run (started on first use). Leaving
    the block normally closes the pool and waits for every task; leaving it by an
    exception (a cancellation included) cancels every task first; either way it
    returns only once every run has ended, and re-raises the block's exception.
    """
    host = await enter_host()
    try:
        opened = _Opened(host)
        assert host.nursery is not None
        nursery = host.nursery
        arguments = {**kwargs, "events": trio_stream(events)}
        pool = await host.call(nursery.start, opened.run, arguments)
        raised = True
        try:
            yield AioPool(host, pool)
            raised = False
        finally:
            opened.cancel = raised
            host.soon(opened.leave.set)
            failure = await unless_cancelled(opened.closed)
            if failure is not None and not raised:
                raise failure
    finally:
        await leave_host(host)

