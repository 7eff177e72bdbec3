"""EventLog: the server's bounded log of pool events, numbered, that every SSE reader
reads at its own pace.

The pump appends without ever waiting; a reader holds only its position. A reader
that falls more than ``max_events`` behind (a slow connection), or that resumes
from an id the log no longer holds, is told how many events it missed: they are
dropped for that reader only.
"""

from __future__ import annotations

from collections import deque
from itertools import islice

import attrs
import trio

from agentcore import AgentPath


@attrs.frozen
class Entry:
    """One logged event: its number, its AgentPath and its JSON text."""

    id: int
    path: AgentPath
    data: bytes


@attrs.define(eq=False)
class EventLog:
    """The last ``max_events`` events (and at most about ``max_bytes`` of their JSON),
    numbered from 1 (see the module docstring)."""

    max_events: int
    max_bytes: int = 32 << 20
    _entries: deque[Entry] = attrs.Factory(deque)
    _bytes: int = 0
    _last: int = 0
    _changed: trio.Event = attrs.Factory(trio.Event)
    closed: bool = False

    @property
    def last_id(self) -> int:
        """The number of the newest event (0: none yet)."""
        return self._last

    @property
    def held(self) -> int:
        """How many events the log holds now."""
        return len(self._entries)

    def append(self, path: AgentPath, data: bytes) -> int:
        """Log one event and wake the readers; returns its number. Not a checkpoint."""
        self._last += 1
        self._entries.append(Entry(self._last, path, data))
        self._bytes += len(data)
        while len(self._entries) > self.max_events or (
                self._bytes > self.max_bytes and len(self._entries) > 1):
            self._bytes -= len(self._entries.popleft().data)
        self._wake()
        return self._last

    def since(self, after: int, limit: int) -> tuple[list[Entry], int]:
        """At most ``limit`` events numbered after ``after``, oldest first, and how many
        events after ``after`` the log no longer holds (missed). Not a checkpoint."""
        if not self._entries or after >= self._last:
            return [], 0
        first = self._entries[0].id
        missed = max(0, first - 1 - after)
        start = max(0, after + 1 - first)
        return list(islice(self._entries, start, start + limit)), missed

    async def wait_after(self, after: int) -> None:
        """Wait until an event numbered after ``after`` is logged, or the log closes.
        A checkpoint."""
        while self._last <= after and not self.closed:
            await self._changed.wait()
        await trio.lowlevel.checkpoint()

    def close(self) -> None:
        """No more events: waiting readers return. Sync and idempotent."""
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
