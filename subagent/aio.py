"""The pool from asyncio code: :func:`open_pool` runs it in a trio guest run.

Trio's guest mode (``trio.lowlevel.start_guest_run``) runs trio's scheduler on top
of the asyncio loop of the calling thread: the pool, its runs, their tools and
models are trio tasks as under ``trio.run``, while the asyncio side holds proxies
(:class:`AioPool`, :class:`AioTask`, :class:`Stream`) whose methods keep the trio
ones' meaning:

- ``await pool.submit(...)``, ``await pool.resume(...)``, ``await pool.recover()``,
  ``await task.wait()`` and ``async for event in stream`` run the trio call in the
  guest run and wait for its outcome; exceptions are the trio call's own objects
  (``subagent.TaskFailed``, ``trio.EndOfChannel``, ...). Cancelling the asyncio task
  that awaits cancels that call only: ``task.wait()`` is a view, as in trio, so the
  subagent task goes on; a ``submit`` cancelled after the pool accepted the task
  cancels that task (nobody holds it).
- ``pool.register``, ``pool.statistics()``, ``task.cancel()``, ``task.steer()``,
  ``stream.close()`` and the other synchronous methods are called directly: both
  loops share this thread, and trio's run context is the thread's for the whole
  guest run, so they act at once (a guest run notices the tasks and deadlines they
  change and runs a tick for them).
- An asyncio consumer that stops reading a :class:`Stream` blocks the runs sending
  to it exactly as a trio consumer does: the trio stream's bound is the only buffer.
- :func:`tool` makes a tool of an asyncio coroutine function: each call runs as an
  asyncio task on the host loop, cancelled when its call is (a ``tool_timeout``, the
  run's end).

One guest run serves every pool opened by :func:`open_pool` on a thread at a time;
it starts with the first and ends when the last one closes. This module imports
only the public names of ``subagent`` and ``agentcore``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal, ParamSpec, TypeVar

import trio

import agentcore
import subagent

__all__ = ["AioPool", "AioTask", "Stream", "open_pool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")

#: Seconds a cancelled asyncio tool call has to finish after its asyncio task is
#: cancelled; a coroutine that swallows the cancellation is left running after it.
TOOL_CANCEL_GRACE = 5.0


class _Host:
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
        await _unless_cancelled(self.ready)

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
        outcome = await _unless_cancelled(self.done)
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


def _waiting_streams() -> set[Stream]:
    # The streams whose receive waits for a guest run to start (woken by _enter_host).
    waiting: set[Stream] | None = getattr(_local, "waiting", None)
    if waiting is None:
        waiting = _local.waiting = set()
    return waiting


def _current_host() -> _Host | None:
    host: _Host | None = getattr(_local, "host", None)
    return host


async def _enter_host() -> _Host:
    loop = asyncio.get_running_loop()
    while True:
        host = _current_host()
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
    host = _Host(loop)
    _local.host = host
    try:
        await host.start()
    except BaseException:
        if host.token is not None:  # it started: a cancellation came as it did
            host.stopping = True
            await host.end()
        if _current_host() is host:
            _local.host = None
        raise
    host.users += 1
    return _woken(host)


def _woken(host: _Host) -> _Host:
    waiting = _waiting_streams()
    for stream in list(waiting):
        stream._wake()
    waiting.clear()
    return host


async def _leave_host(host: _Host) -> None:
    host.users -= 1
    if host.users == 0:
        host.stopping = True
        try:
            await host.end()
        finally:
            if _current_host() is host:
                _local.host = None


async def _unless_cancelled(fut: asyncio.Future[R]) -> R:
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


def _trio_stream(events: Stream | subagent.Stream | None) -> subagent.Stream | None:
    return events.stream if isinstance(events, Stream) else events


class Stream:
    """A bounded event stream read from asyncio: a :class:`subagent.Stream` (its
    ``stream``, which the runs send to) with asyncio-side ``receive`` and ``async for``.

    Pass it as ``events=`` to :func:`open_pool` or :meth:`AioPool.submit`. Its only
    buffer is the trio stream's, so backpressure is the same. Once the guest run has
    ended, what the stream still buffers can be read; a receive on an open, empty
    stream then waits for the thread's next guest run or the stream's close.
    """

    def __init__(self, buffer: int, *, overflow: Literal["block", "drop_newest"] = "block"
                 ) -> None:
        self.stream = subagent.Stream(buffer, overflow=overflow)
        # Set when a guest run starts or the stream closes, while a receive waits
        # with no guest run (made on such a wait).
        self._change: asyncio.Event | None = None

    def __repr__(self) -> str:
        return f"<subagent.aio.Stream of {self.stream!r}>"

    def statistics(self) -> subagent.StreamStatistics:
        """A snapshot of the stream's state."""
        return self.stream.statistics()

    def close(self) -> None:
        """Close it (see :meth:`subagent.Stream.close`); sync and idempotent."""
        self.stream.close()
        self._wake()

    async def receive(self) -> subagent.Event:
        """Take the oldest event, waiting for one (from any pool of this thread's
        guest run, or of the next one if none runs now).

        Raises:
          trio.EndOfChannel: the stream is closed and drained.
        """
        stream = self.stream
        while True:
            try:
                return stream.receive_nowait()
            except trio.WouldBlock:
                pass
            host = _current_host()
            if host is not None and not host.ended:
                if host.stopping:  # its last pool closed: look again once it ended
                    await asyncio.shield(host.done)
                    continue
                try:
                    return await host.call(stream.receive)
                except subagent.PoolClosedError:
                    continue  # the guest run ended as this waited: look again
            # No guest run can send to it now: wait for one to start, or a close.
            await self._changed().wait()

    def _changed(self) -> asyncio.Event:
        if self._change is None:
            self._change = asyncio.Event()
            _waiting_streams().add(self)
        return self._change

    def _wake(self) -> None:
        if self._change is not None:
            self._change.set()
            self._change = None

    def __aiter__(self) -> Stream:
        return self

    async def __anext__(self) -> subagent.Event:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class AioTask:
    """A :class:`subagent.Task` seen from asyncio (its ``task``): the same attributes,
    with :meth:`wait` awaitable from asyncio."""

    def __init__(self, host: _Host, task: subagent.Task) -> None:
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

    def __init__(self, host: _Host, pool: subagent.Pool) -> None:
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
                                     events=_trio_stream(events), history=history)
        return AioTask(self._host, task)

    def submit_nowait(self, name: str, input: str, *, parent_path: tuple[str, ...] = (),
                      events: Stream | subagent.Stream | None = None,
                      history: Iterable[agentcore.Message] = ()) -> AioTask:
        """See :meth:`subagent.Pool.submit_nowait`."""
        task = self.pool.submit_nowait(name, input, parent_path=parent_path,
                                       events=_trio_stream(events), history=history)
        return AioTask(self._host, task)

    async def resume(self, state: agentcore.RunState, *, name: str | None = None,
                     events: Stream | subagent.Stream | None = None) -> AioTask:
        """See :meth:`subagent.Pool.resume`."""
        task = await self._host.call(self.pool.resume, state, name=name,
                                     events=_trio_stream(events))
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
    def __init__(self, host: _Host) -> None:
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
    host = await _enter_host()
    try:
        opened = _Opened(host)
        assert host.nursery is not None
        nursery = host.nursery
        arguments = {**kwargs, "events": _trio_stream(events)}
        pool = await host.call(nursery.start, opened.run, arguments)
        raised = True
        try:
            yield AioPool(host, pool)
            raised = False
        finally:
            opened.cancel = raised
            host.soon(opened.leave.set)
            failure = await _unless_cancelled(opened.closed)
            if failure is not None and not raised:
                raise failure
    finally:
        await _leave_host(host)


def tool(fn: Callable[P, Awaitable[R]] | None = None, /, **options: Any) -> Any:
    """Make an agentcore tool of an asyncio coroutine function: a decorator, with
    :func:`agentcore.tool`'s options (``name``, ``description``, ``read_only``,
    ``idempotent``, ``liveness``).

    Each call runs the coroutine as an asyncio task on the loop of the pool's
    :func:`open_pool`, and is cancelled with its call (``tool_timeout``, the run's
    end): the asyncio task is cancelled and given :data:`TOOL_CANCEL_GRACE` seconds.
    Such a tool works only in a pool opened by :func:`open_pool`; elsewhere its call
    fails with a ``RuntimeError`` result.
    """

    def make(fn: Callable[P, Awaitable[R]]) -> agentcore.TypedTool[P, R]:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"subagent.aio.tool takes an async def function, not {fn!r}")

        @functools.wraps(fn)
        async def on_host(*args: P.args, **kwargs: P.kwargs) -> R:
            host = _current_host()
            if host is None or host.ended:
                raise RuntimeError("an asyncio tool runs only in a pool opened by "
                                   "subagent.aio.open_pool")
            return await host.on_loop(fn(*args, **kwargs))

        made: agentcore.TypedTool[P, R] = agentcore.tool(on_host, **options)  # type: ignore[arg-type]
        return made

    return make if fn is None else make(fn)
