"""The event sink of one run in the pool: :class:`Emitter` (made by :func:`emitter`).

A run's event pushes back the idle watchdogs above it, is shown to the pool's
observer (``subagent.otel``), if any, then goes to the task's stream, if any.

Two ways in, the same outcome:

- ``await emitter(event)``, the run's ``EventSink``: a checkpoint when it sends to a
  stream (:meth:`Stream.send`: it checks for cancellation, and waits while the
  buffer is full);
- :meth:`Emitter.emit_nowait`, agentcore's synchronous fast path (see
  ``agentcore._events.taken_now``): the event is delivered now when the stream has
  room and the task is not cancelled, and it returns True; else it does nothing and
  returns False, and the run awaits the emitter (backpressure and cancellation as
  above). Not a checkpoint.

**Idle watchdogs.** Pushing a deadline back costs trio a deadline update per
enclosing watchdog, so a run pushes at most once per :data:`PUSH_RESOLUTION`: an
event within that time of the run's last push does not push. ``idle_timeout``
therefore has a resolution of 10 ms: a task is idle from its last push, at most
10 ms before its last event (events spaced 10 ms or more apart, or at the same
instant of trio's clock, keep it exact). A run with no ``idle_timeout`` on its path
pushes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import trio
from trio.abc import Clock

import agentcore

from .._events import Event, tagged_of
from .._stream import Stream
from ._task import Task

#: Seconds within which a run's events push its idle watchdogs back only once (the
#: resolution of ``Spec.idle_timeout``).
PUSH_RESOLUTION = 0.01


def emitter(task: Task) -> Emitter | None:
    """The event sink of ``task``'s run, or None when nothing would see its events:
    no destination, no observer and no ``idle_timeout`` on its path to push back (a
    delegating tool reads the id of the call it runs in from
    ``agentcore.lowlevel.current_tool_call()``, not from events). The run then skips its
    start and end emits."""
    watched = False
    above: Task | None = task
    while above is not None:
        if above.spec.idle_timeout is not None:
            watched = True
            break
        above = above.parent
    destination = task.events
    observe = task.pool._observer
    if destination is None and observe is None and not watched:
        return None
    return Emitter(task, destination, observe, trio.lowlevel.current_clock() if watched else None)


class Emitter:
    """A run's event sink in the pool (see the module docstring). A slotted object
    rather than a closure: a closure and its cells cost a parked run about twice the
    bytes.

    Attributes:
      task: The task whose run emits.
      destination: Its stream, if any.
      observe: The pool's observer, if any.
      clock: trio's clock when a task on its path has an ``idle_timeout`` (read
        directly: ``trio.current_time()`` is two calls more), else None.
      pushed: When it last pushed the idle watchdogs back (trio's clock).
      start_dropped: Whether ``drop_newest`` dropped the run's ``agent_start`` (its
        ``agent_end`` is then dropped too: start and end pair up).
    """

    __slots__ = ("clock", "destination", "observe", "pushed", "start_dropped", "task")

    def __init__(
        self, task: Task, destination: Stream | None,
        observe: Callable[[Event], None] | None, clock: Clock | None,
    ) -> None:
        self.task = task
        self.destination = destination
        self.observe = observe
        self.clock = clock
        self.pushed = -math.inf
        self.start_dropped = False

    def limited(self, now: float) -> None:
        """The task's limits were set at ``now`` (``Task._limit``): a push of its own
        idle watchdog. Push the ones above it too, as a push at ``now`` would; the
        run's events within :data:`PUSH_RESOLUTION` of it then push nothing. Not a
        checkpoint."""
        if self.clock is not None:
            self.pushed = now
            parent = self.task._parent
            if parent is not None:
                parent._progress(now)

    def _push(self, clock: Clock) -> None:
        # Push the idle watchdogs above the run back, unless it did within PUSH_RESOLUTION
        # (inline in emit_nowait).
        now = clock.current_time()
        if now - self.pushed >= PUSH_RESOLUTION:
            self.pushed = now
            self.task._progress(now)

    async def __call__(self, event: agentcore.Event) -> None:
        """Deliver ``event``: a checkpoint when it goes to a stream (it may wait for
        room within the task's limits); once the run has ended (its summary is set),
        its end never waits: see :class:`Stream`."""
        if self.clock is not None:
            self._push(self.clock)
        destination = self.destination
        observe = self.observe
        if destination is None and observe is None:
            return
        task = self.task
        kind = event.kind
        wrapped = tagged_of(task._path, kind, event, task._call_id)
        if observe is not None:
            observe(wrapped)
        if destination is None:
            return
        run = task._run
        if run is not None and run.summary is not None:
            self._deliver_end(destination, wrapped)
        elif kind is agentcore.EventKind.agent_start:
            dropped = destination._dropped
            await destination.send(wrapped)
            self.start_dropped = destination._dropped != dropped
        else:
            await destination.send(wrapped)

    def emit_nowait(self, event: agentcore.Event) -> bool:
        """Deliver ``event`` now if that needs no wait: True when delivered (as
        ``await self(event)`` would have). False, having done nothing, when the stream
        is full (policy ``block``) or the task is cancelled while the run is going:
        the caller then awaits the emitter. Not a checkpoint."""
        # (The task's private fields are read directly: this runs for every event of
        # every run. "Cancelled" is read as trio.lowlevel.checkpoint_if_cancelled reads
        # it: trio has no public synchronous form, see agentcore._audit; a trio without
        # that attribute takes the awaited path.)
        destination = self.destination
        task = self.task
        clock = self.clock
        if destination is None:
            if clock is not None:
                self._push(clock)
            if self.observe is not None:
                self.observe(tagged_of(task._path, event.kind, event, task._call_id))
            return True
        run = task._run
        ended = run is not None and run.summary is not None
        if not ended:
            if not destination._room():
                return False
            # A cancelled sender delivers nothing here: trio's public word for "the
            # next checkpoint raises Cancelled" is an effective deadline of -inf.
            if trio.current_effective_deadline() == -math.inf:
                return False
        if clock is not None:
            # _push, inline (a call fewer per event).
            now = clock.current_time()
            if now - self.pushed >= PUSH_RESOLUTION:
                self.pushed = now
                task._progress(now)
        kind = event.kind
        wrapped = tagged_of(task._path, kind, event, task._call_id)
        if self.observe is not None:
            self.observe(wrapped)
        if ended:
            self._deliver_end(destination, wrapped)
        elif kind is agentcore.EventKind.agent_start:
            dropped = destination._dropped
            destination.send_nowait(wrapped)
            self.start_dropped = destination._dropped != dropped
        else:
            destination.send_nowait(wrapped)
        return True

    def _deliver_end(self, destination: Stream, wrapped: Event) -> None:
        # An event of the run's end: it never waits (the stream's reserve).
        if self.start_dropped and wrapped.kind is agentcore.EventKind.agent_end:
            destination._drop_unpaired(wrapped)
        else:
            destination._send_reserved(wrapped)
