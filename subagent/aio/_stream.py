"""The event stream read from asyncio. Not a checkpoint anywhere on the trio side:
its receive waits in asyncio."""

from __future__ import annotations

import asyncio
from typing import Literal

import trio

import subagent

from ._host import current_host, waiting_streams

__all__ = ["Stream"]


def trio_stream(events: Stream | subagent.Stream | None) -> subagent.Stream | None:
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
            host = current_host()
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
            waiting_streams().add(self)
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


