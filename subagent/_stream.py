"""Stream: a caller-owned, bounded, closable channel of subagent events."""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Literal

import attrs
import trio

from ._events import Event

Overflow = Literal["block", "drop_newest"]

#: The most events :meth:`Stream.receive` returns in a row without yielding to the
#: scheduler (it still checks for cancellation on every call).
RECEIVE_BATCH = 64


@attrs.frozen
class StreamStatistics:
    """A snapshot of a :class:`Stream`."""

    buffered: int
    """Events waiting in the buffer."""
    max_buffer: int
    """The buffer's size."""
    sent: int
    """Events accepted (buffered or handed to a receiver) since creation."""
    dropped: int
    """Events the ``drop_newest`` policy discarded because the buffer was full."""
    dropped_after_close: int
    """Events sent after the close, or still blocked at the close, and so discarded."""
    closed: bool
    """Whether :meth:`Stream.close` was called."""
    waiting_senders: int
    """Senders blocked on a full buffer."""
    waiting_receivers: int
    """Receivers blocked on an empty buffer."""


class Stream:
    """A bounded channel of :class:`Event` the caller owns: runs send, the caller receives.

    The pool never closes a stream it did not create. ``await send(ev)``
    blocks while the buffer is full, so backpressure reaches the producing
    run, unless ``overflow="drop_newest"`` (for observers that must never slow
    the agents: an event that finds the buffer full is dropped and counted).
    :meth:`close` is sync and idempotent: later sends are dropped silently,
    blocked senders are released (their events dropped), and ``async for``
    ends once the buffer is drained.

    Args:
      buffer: How many events it holds (0: each send waits for a receiver).
      overflow: ``"block"`` (default) or ``"drop_newest"``.
    """

    def __init__(self, buffer: int, *, overflow: Overflow = "block") -> None:
        if buffer < 0:
            raise ValueError(f"Stream buffer must be at least 0, not {buffer!r}")
        if overflow not in ("block", "drop_newest"):
            raise ValueError(f"Stream overflow must be 'block' or 'drop_newest', not {overflow!r}")
        self._max = buffer
        self._overflow = overflow
        self._buffer: deque[Event] = deque()
        self._senders: OrderedDict[trio.lowlevel.Task, Event] = OrderedDict()
        self._receivers: OrderedDict[trio.lowlevel.Task, None] = OrderedDict()
        self._closed = False
        self._sent = 0
        self._dropped = 0
        self._dropped_after_close = 0
        self._unyielded = 0

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return (
            f"<subagent.Stream {len(self._buffer)}/{self._max} buffered, sent={self._sent}, "
            f"dropped={self._dropped}{state}>"
        )

    def statistics(self) -> StreamStatistics:
        """A snapshot of the stream's state; not a checkpoint."""
        return StreamStatistics(
            buffered=len(self._buffer),
            max_buffer=self._max,
            sent=self._sent,
            dropped=self._dropped,
            dropped_after_close=self._dropped_after_close,
            closed=self._closed,
            waiting_senders=len(self._senders),
            waiting_receivers=len(self._receivers),
        )

    def send_nowait(self, event: Event) -> None:
        """Send without blocking; not a checkpoint.

        After the close the event is dropped silently; with ``drop_newest`` a
        full buffer drops it (counted).

        Raises:
          trio.WouldBlock: the buffer is full and the policy is ``block``.
        """
        if self._closed:
            self._dropped_after_close += 1
        elif self._receivers:
            # Buffered, and one parked receiver woken to take it. Sends before it
            # runs just buffer, so a burst costs one wake-up, not one per event.
            # Parked receivers imply an empty buffer, so the buffer exceeds its
            # size only by events promised to receivers already woken.
            self._buffer.append(event)
            self._sent += 1
            receiver, _ = self._receivers.popitem(last=False)
            trio.lowlevel.reschedule(receiver)
        elif len(self._buffer) < self._max:
            self._buffer.append(event)
            self._sent += 1
        elif self._overflow == "drop_newest":
            self._dropped += 1
        else:
            raise trio.WouldBlock

    async def send(self, event: Event) -> None:
        """Send ``event``, waiting while the buffer is full (policy ``block``).

        It checks for cancellation, but yields to the scheduler only when it
        has to wait: a send into a buffer with room costs no context switch.
        A close while it waits releases it (the event is dropped).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self.send_nowait(event)
        except trio.WouldBlock:
            pass
        else:
            return
        task = trio.lowlevel.current_task()
        self._senders[task] = event

        def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
            del self._senders[task]
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def receive_nowait(self) -> Event:
        """Take the oldest event without blocking; not a checkpoint.

        Raises:
          trio.WouldBlock: nothing is buffered and the stream is open.
          trio.EndOfChannel: the stream is closed and drained.
        """
        buffer = self._buffer
        if buffer:
            event = buffer.popleft()
            if self._senders and len(buffer) < self._max:
                sender, waiting = self._senders.popitem(last=False)
                buffer.append(waiting)
                self._sent += 1
                trio.lowlevel.reschedule(sender)
            return event
        if self._senders:
            sender, event = self._senders.popitem(last=False)
            self._sent += 1
            trio.lowlevel.reschedule(sender)
            return event
        if self._closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> Event:
        """Take the oldest event, waiting for one.

        It always checks for cancellation, but it does not yield to the
        scheduler on every call: a consumer draining a buffered backlog yields
        once every :data:`RECEIVE_BATCH` events (and whenever it has to wait),
        so draining costs few context switches and still cannot starve the
        other tasks.

        Raises:
          trio.EndOfChannel: the stream is closed and drained.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                event = self.receive_nowait()
            except trio.WouldBlock:
                self._unyielded = 0
                await self._wait_for_send()
                continue
            self._unyielded += 1
            if self._unyielded >= RECEIVE_BATCH:
                self._unyielded = 0
                await trio.lowlevel.cancel_shielded_checkpoint()
            return event

    async def _wait_for_send(self) -> None:
        # Parks until a send (its event is then buffered, though another receiver
        # may take it first) or the close wakes this task.
        task = trio.lowlevel.current_task()
        self._receivers[task] = None

        def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
            del self._receivers[task]
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def close(self) -> None:
        """Stop accepting events; sync and idempotent.

        Blocked senders are released (their events dropped and counted in
        ``dropped_after_close``); blocked receivers get ``trio.EndOfChannel``;
        buffered events can still be received.
        """
        if self._closed:
            return
        self._closed = True
        for sender in self._senders:
            self._dropped_after_close += 1
            trio.lowlevel.reschedule(sender)
        self._senders.clear()
        for receiver in self._receivers:
            trio.lowlevel.reschedule(receiver)
        self._receivers.clear()

    def __aiter__(self) -> Stream:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
