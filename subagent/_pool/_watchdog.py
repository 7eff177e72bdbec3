"""The blocked-loop detector: a thread that reports when the trio thread has not reached
a checkpoint for too long (``open_pool(loop_watchdog=...)``).

Trio can cancel a task only at a checkpoint, so the one limit it cannot enforce is an
async tool that blocks the event loop itself (``time.sleep``, a blocking socket, a long
computation inside ``async def``): every timeout of every task waits for it. The
watchdog finds the culprit. Its thread asks the loop for a heartbeat every quarter of
the threshold (``TrioToken.run_sync_soon``, served when the loop reaches its scheduler,
whatever the clock); when one is not served within the threshold, it takes the trio
thread's stack (``sys._current_frames``), logs a warning naming the running tool and the
stack, and, once the loop runs again, the pool emits one ``event_loop_blocked`` event.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import threading
import time
import traceback
from types import FrameType
from typing import TYPE_CHECKING

import attrs
import trio

from agentcore import AgentPath

from .._errors import format_path
from .._events import Event, EventKind, LoopStall

if TYPE_CHECKING:
    from ._pool import Pool

logger = logging.getLogger("subagent")

#: The innermost frames of the trio thread's stack that a report keeps, at most.
STACK_LIMIT = 64


def check_threshold(value: float | None) -> None:
    """Refuse a ``loop_watchdog`` that is not None or a finite positive number."""
    if value is not None and not (0 < value < math.inf):
        raise ValueError(
            f"open_pool loop_watchdog must be a positive number of seconds, not {value!r}"
        )


def _running_call(frame: FrameType | None) -> tuple[str | None, str | None, AgentPath]:
    # The innermost tool call on the stack: agentcore's call_tool frame (or announce_call's,
    # while a batch reports a call's tool_start) holds the call and the run (read from
    # the watchdog thread, like a debugger does).
    from agentcore._run import _toolcall

    codes = (_toolcall.call_tool.__code__, _toolcall.announce_call.__code__)
    while frame is not None:
        if any(frame.f_code is code for code in codes):
            names = frame.f_locals
            call, run = names.get("call"), names.get("run")
            path = getattr(run, "path", ())
            return getattr(call, "name", None), getattr(call, "id", None), path
        frame = frame.f_back
    return None, None, ()


class LoopWatchdog:
    """Watches the trio thread of one pool; see the module docstring.

    Args:
      threshold: Seconds without a checkpoint that count as a stall.
      pool: Where ``event_loop_blocked`` events go (its ``events`` stream, if any).
    """

    def __init__(self, threshold: float, pool: Pool) -> None:
        self.threshold = threshold
        self._pool = pool
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._trio_thread = 0
        self._lock = threading.Lock()
        # Guarded by _lock: when the pending heartbeat was asked for (None: none
        # pending), and the stall it has shown, reported when it is served.
        self._asked: float | None = None
        self._stall: LoopStall | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, nursery: trio.Nursery) -> None:
        """Start the thread; the reports' tasks run in ``nursery``. Not a checkpoint."""
        self._nursery = nursery
        self._token = trio.lowlevel.current_trio_token()
        self._trio_thread = threading.get_ident()
        self._thread = threading.Thread(
            target=self._watch, name="subagent loop watchdog", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (at once: it only waits on an event)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # -- the watchdog thread ---------------------------------------------------------

    def _watch(self) -> None:
        assert self._token is not None
        while not self._stop.wait(self.threshold / 4):
            now = time.monotonic()
            seen: LoopStall | None = None
            with self._lock:
                asked = self._asked
                if asked is None:
                    self._asked = now
                elif self._stall is None and now - asked >= self.threshold:
                    # Taken under the lock, so that the heartbeat, if the loop serves
                    # it meanwhile, finds the stall and reports it.
                    seen = self._stall = self._see(now - asked)
            if seen is not None:
                # Logged outside the lock: a slow log handler must not hold the loop.
                where = (
                    f"tool {seen.tool!r} of {format_path(seen.path)}"
                    if seen.tool is not None else "no tool call"
                )
                logger.warning(
                    "the trio event loop has not reached a checkpoint for %.2fs "
                    "(loop_watchdog=%g), running %s; the trio thread's stack:\n%s",
                    seen.duration, self.threshold, where, seen.stack,
                )
            if asked is None:
                try:
                    self._token.run_sync_soon(self._beat)
                except trio.RunFinishedError:
                    return

    def _see(self, blocked: float) -> LoopStall:
        # What the trio thread is doing now.
        frame = sys._current_frames().get(self._trio_thread)
        tool, call_id, path = _running_call(frame)
        stack = "".join(traceback.format_stack(frame, STACK_LIMIT)) if frame else ""
        return LoopStall(blocked, tool, call_id, path, stack)

    # -- the trio thread ---------------------------------------------------------------

    def _beat(self) -> None:
        # The loop reached its scheduler: a stall seen meanwhile is over.
        now = time.monotonic()
        with self._lock:
            asked, stall = self._asked, self._stall
            self._asked = self._stall = None
        if stall is None or asked is None:
            return
        stall = attrs.evolve(stall, duration=now - asked)
        assert self._nursery is not None
        # A RuntimeError: the pool's nursery has closed (its tasks have all ended); the
        # warning was logged when the stall was seen.
        with contextlib.suppress(RuntimeError):
            self._nursery.start_soon(self._report, stall, name="subagent loop watchdog report")

    async def _report(self, stall: LoopStall) -> None:
        events = self._pool.events
        if events is not None:
            await events.send(
                Event(stall.path, EventKind.event_loop_blocked, None, stall.call_id,
                      error=f"the event loop was blocked for {stall.duration:.2f}s",
                      stall=stall)
            )
