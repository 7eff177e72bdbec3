"""The trio guest run hosted by one asyncio loop (one per thread at a time), the
calls bridged into it, and the thread's bookkeeping of it. Not public."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol, TypeVar

import trio

import subagent

P = ParamSpec("P")
R = TypeVar("R")

#: Seconds a cancelled asyncio tool call has to finish after its asyncio task is
#: cancelled; a coroutine that swallows the cancellation is left running after it.
TOOL_CANCEL_GRACE = 5.0


class Host:
    """The trio guest run on one asyncio loop, and the trio calls made for it.

    Owns the guest run's nursery: every bridged call and every pool of this thread's
    :func:`open_pool` blocks is a task in it.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.users = 0
        self.token: trio.lowlevel.TrioToken | None = None
        self.nursery: trio.Nursery | None = None
        self.stop: trio.Event | None = None
        self.ended = False
        self.stopping = False  # its last block left: it ends, takes no new block
        self.ready: asyncio.Future[None] = loop.create_future()
        self.done: asyncio.Future[Any] = loop.create_future()

    async def start(self) -> None:
        trio.lowlevel.start_guest_run(
            self._main,
            run_sync_soon_threadsafe=self.loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=self.loop.call_soon,
            done_callback=self._finished,
            host_uses_signal_set_wakeup_fd=True,
        )
        await unless_cancelled(self.ready)

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        self.stop = trio.Event()
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                self.ready.set_result(None)
                await self.stop.wait()
                nursery.cancel_scope.cancel()
        finally:
            # Calls bridged from now on (the run ends) fail rather than crash it.
            self.nursery = None

    def _finished(self, result: Any) -> None:
        self.ended = True
        self.nursery = None
        if not self.done.done():
            self.done.set_result(result)

    async def end(self) -> None:
        """Stop the guest run and wait for its end (calls still waiting get
        :class:`subagent.PoolClosedError`). Returns its outcome's error, if any."""
        self.soon(_set, self.stop)
        outcome = await unless_cancelled(self.done)
        outcome.unwrap()

    def soon(self, fn: Callable[..., object], *args: Any) -> bool:
        """Run ``fn(*args)`` in the guest run (woken for it); nothing if it ended.
        Returns whether it will run."""
        if self.token is None or self.ended:
            return False
        try:
            self.token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            return False
        return True

    async def call(self, fn: Callable[..., Awaitable[R]], *args: Any, **kwargs: Any) -> R:
        """``await fn(*args, **kwargs)`` in the guest run, from asyncio. A checkpoint
        of the asyncio task; cancelling it cancels that trio call."""
        if not self.ready.done():
            await asyncio.shield(self.ready)
        if self.ended or self.nursery is None:
            raise subagent.PoolClosedError("the pool's trio run has ended")
        fut: asyncio.Future[R] = self.loop.create_future()
        scope = trio.CancelScope()
        if not self.soon(self._spawn, fut, scope, fn, args, kwargs):
            raise subagent.PoolClosedError("the pool's trio run has ended")
        try:
            return await fut
        except asyncio.CancelledError:
            scope.cancel()
            raise

    def _spawn(self, fut: asyncio.Future[R], scope: trio.CancelScope,
               fn: Callable[..., Awaitable[R]], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> None:
        if fut.done():
            return
        if self.nursery is None:
            fut.set_exception(subagent.PoolClosedError("the pool's trio run has ended"))
            return
        self.nursery.start_soon(self._bridged, fut, scope, fn, args, kwargs)

    @staticmethod
    async def _bridged(fut: asyncio.Future[R], scope: trio.CancelScope,
                       fn: Callable[..., Awaitable[R]], args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> None:
        try:
            with scope:
                value = await fn(*args, **kwargs)
        except trio.Cancelled:
            if not fut.done():
                fut.set_exception(subagent.PoolClosedError(
                    "the pool's trio run ended while this call waited"))
            raise
        except BaseException as exc:  # handed to the asyncio caller, as raised
            if not fut.done():
                fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        if scope.cancelled_caught:
            return
        if fut.done():
            # The caller was cancelled as the call completed: nobody holds the task.
            if isinstance(value, subagent.Task):
                value.cancel()
            return
        fut.set_result(value)

    async def on_loop(self, coro: Awaitable[R]) -> R:
        """Run an asyncio coroutine on the host loop from a trio task, and wait for it.
        A checkpoint; cancelling it cancels the asyncio task (waiting at most
        :data:`TOOL_CANCEL_GRACE` seconds for it to finish)."""
        task = asyncio.ensure_future(coro, loop=self.loop)
        finished = trio.Event()
        task.add_done_callback(lambda _: self.soon(finished.set))
        try:
            await finished.wait()
        except BaseException:
            task.cancel()
            with trio.move_on_after(TOOL_CANCEL_GRACE) as grace:
                grace.shield = True
                await finished.wait()
            raise
        if task.cancelled():
            raise RuntimeError("the asyncio tool's coroutine was cancelled from outside its call")
        return task.result()


_local = threading.local()


class Waiting(Protocol):
    """A receive (a :class:`~subagent.aio.Stream`'s) waiting for the thread's next
    guest run."""

    def _wake(self) -> None: ...


def waiting_streams() -> set[Waiting]:
    # The streams whose receive waits for a guest run to start (woken by enter_host).
    waiting: set[Waiting] | None = getattr(_local, "waiting", None)
    if waiting is None:
        waiting = _local.waiting = set()
    return waiting


def current_host() -> Host | None:
    host: Host | None = getattr(_local, "host", None)
    return host


async def enter_host() -> Host:
    loop = asyncio.get_running_loop()
    while True:
        host = current_host()
        if host is not None and host.loop is not loop:
            raise RuntimeError(
                "subagent.aio: another event loop of this thread hosts a trio run already")
        if host is None or host.ended:
            break
        # Another block of this loop starts or stops the thread's guest run: wait for
        # that (a thread holds one trio run at a time), then look again.
        if host.stopping:
            await asyncio.shield(host.done)
        elif not host.ready.done():
            await asyncio.shield(host.ready)
        else:
            host.users += 1
            return _woken(host)
    host = Host(loop)
    _local.host = host
    try:
        await host.start()
    except BaseException:
        if host.token is not None:  # it started: a cancellation came as it did
            host.stopping = True
            await host.end()
        if current_host() is host:
            _local.host = None
        raise
    host.users += 1
    return _woken(host)


def _woken(host: Host) -> Host:
    waiting = waiting_streams()
    for stream in list(waiting):
        stream._wake()
    waiting.clear()
    return host


async def leave_host(host: Host) -> None:
    host.users -= 1
    if host.users == 0:
        host.stopping = True
        try:
            await host.end()
        finally:
            if current_host() is host:
                _local.host = None


async def unless_cancelled(fut: asyncio.Future[R]) -> R:
    # Waits for fut through any number of cancellations of the awaiting task (the
    # pool's end must be waited for), then re-raises the first one.
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            value = await asyncio.shield(fut)
        except asyncio.CancelledError as exc:
            if fut.done():
                raise
            cancelled = cancelled or exc
            continue
        if cancelled is not None:
            raise cancelled
        return value


def _set(event: trio.Event | None) -> None:
    if event is not None:
        event.set()


