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
    """Events the ``drop_newest`` policy discarded because the buffer was full, and the
    ``agent_end`` of each run whose ``agent_start`` it discarded (start and end pair up)."""
    dropped_after_close: int
    """Events sent after the close, or still blocked at the close, and so discarded."""
    dropped_cancelled: int
    """Events whose :meth:`Stream.send` was cancelled before the stream took them (the
    sender's scope fired while it waited for room: a task's ``timeout``,
    ``idle_timeout`` or cancel), and so discarded."""
    reserved: int
    """Events of ``sent`` that went beyond the buffer through the reserve (a run's
    end and the pool's lifecycle events, which never wait: see :class:`Stream`)."""
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
    :meth:`close` is sync and idempotent: later sends are dropped (counted),
    blocked senders are released (their events dropped and counted), and
    ``async for`` ends once the buffer is drained.

    **Delivered or counted.** Every event the pool sends is received, still
    buffered, or counted in :meth:`statistics`: ``dropped`` (the ``drop_newest``
    policy), ``dropped_after_close``, or ``dropped_cancelled`` (its sender was
    cancelled while it waited for room). Which events wait for room:

    - A run's events, from ``agent_start`` until the run ends (model, tool and
      delegation events, ``result_delivered``), take ordinary backpressure, and
      the run waits within its task's limits: ``timeout`` and ``idle_timeout``
      include time blocked on a full stream, so a consumer that stops reading
      makes tasks time out; it does not make them hang. An event whose wait is
      cancelled counts as ``dropped_cancelled``; when that is ``agent_start``
      the run delivers nothing of its end either (no ``agent_end``), and with ``drop_newest`` a run
      whose ``agent_start`` was dropped has its ``agent_end`` dropped too (SPEC
      3.5: start and end pair up).
    - A run's end (what it emits once it has ended: ``interrupt_received`` for
      an abort, ``error``, ``follow_up_queued`` for follow-ups not yet reported,
      and ``agent_end``) and the pool's lifecycle events (``task_queued``,
      ``task_started``, ``task_finished``, ``task_cancelled``,
      ``task_orphaned``) never wait, under either policy: with no room they are
      buffered beyond the buffer's size, in a reserve, so an ending or
      cancelled task is never held back and these events are never lost while
      the stream is open. The reserve holds at most four lifecycle events and
      one run's end per task whose events the consumer has not read yet; while
      it is in use, ordinary sends wait (or drop) as for a full buffer.

    A consumer that may go away closes the stream from its side, so that
    blocked senders are released (their events count as ``dropped_after_close``)
    and later events are dropped rather than kept (a stream nobody reads or
    closes keeps every later task's lifecycle events)::

        try:
            async for event in stream:
                ...
        finally:
            stream.close()

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
        self._dropped_cancelled = 0
        self._reserved = 0
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
            dropped_cancelled=self._dropped_cancelled,
            reserved=self._reserved,
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

    def _room(self) -> bool:
        # Whether send_nowait takes (or drops, counted) an event now rather than raise
        # trio.WouldBlock. Not a checkpoint.
        return (
            self._closed or bool(self._receivers) or len(self._buffer) < self._max
            or self._overflow == "drop_newest"
        )

    async def send(self, event: Event) -> None:
        """Send ``event``, waiting while the buffer is full (policy ``block``).

        It checks for cancellation, but yields to the scheduler only when it
        has to wait: a send into a buffer with room costs no context switch.
        A close while it waits releases it (the event is dropped and counted in
        ``dropped_after_close``); a cancel before the stream took the event
        discards it, counted in ``dropped_cancelled``.
        """
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
        except trio.Cancelled:
            self._discard_cancelled()
            raise
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
            self._discard_cancelled()
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def _discard_cancelled(self) -> None:
        if self._closed:
            self._dropped_after_close += 1
        else:
            self._dropped_cancelled += 1

    def _send_reserved(self, event: Event) -> None:
        # The path of events that never wait (a run's end, the pool's lifecycle events;
        # see the class docstring): buffered even when the buffer is full, under
        # either policy. Not a checkpoint. Senders bound the reserve: each task sends
        # at most a few such events.
        if self._closed:
            self._dropped_after_close += 1
            return
        self._buffer.append(event)
        self._sent += 1
        if self._receivers:
            receiver, _ = self._receivers.popitem(last=False)
            trio.lowlevel.reschedule(receiver)
        elif len(self._buffer) > self._max:
            self._reserved += 1

    def _drop_unpaired(self, event: Event) -> None:
        # Counts ``event``, the agent_end of a run whose agent_start ``drop_newest``
        # dropped: start and end pair up, so it is dropped too. Not a checkpoint.
        if self._closed:
            self._dropped_after_close += 1
        else:
            self._dropped += 1

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
        # receive(), inline (an await layer fewer per event), ending the iteration at
        # the close once drained.
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                event = self.receive_nowait()
            except trio.WouldBlock:
                self._unyielded = 0
                await self._wait_for_send()
                continue
            except trio.EndOfChannel:
                raise StopAsyncIteration from None
            self._unyielded += 1
            if self._unyielded >= RECEIVE_BATCH:
                self._unyielded = 0
                await trio.lowlevel.cancel_shielded_checkpoint()
            return event
