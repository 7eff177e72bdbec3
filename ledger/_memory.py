"""MemorySink: a chained ledger held in a list (tests, and the hot path)."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio

from ._chain import Chain
from ._clock import utc_now
from ._entry import Entry, Record
from ._errors import SinkClosedError
from ._offload import is_large, redact_in_thread
from ._redact import redact_record
from ._sink import SinkStatistics

#: The most records :meth:`MemorySink.record` stores in a row without yielding to
#: the scheduler (it still checks for cancellation on every call).
RECORD_BATCH = 64


@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class MemorySink:
    """A sink that keeps entries in memory, in order, in :attr:`entries`.

    Entries are redacted and chained exactly as the file sinks do it.

    Args:
      clock: Returns the time of each entry (UTC ISO-8601 ending in ``Z``);
        tests pass a fixed one.
    """

    clock: Callable[[], str] = utc_now
    entries: list[Entry] = attrs.field(factory=list, init=False)
    """The recorded entries, in order."""
    _chain: Chain = attrs.field(factory=Chain, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _unyielded: int = attrs.field(default=0, init=False)

    async def record(self, record: Record) -> Entry:
        """Redact, chain and append ``record``; return its entry.

        It always checks for cancellation (a cancelled call records nothing),
        but since appending to a list never blocks, it yields to the scheduler
        only once every :data:`RECORD_BATCH` records: a yield per record was
        a large part of the audit's cost on the hot path, and a task that
        records in a loop still cannot starve the others.

        Raises:
          SinkClosedError: The sink was closed.
          ValueError: ``record.kind`` is empty.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        record = await redact_in_thread(record) if is_large(record) else redact_record(record)
        if self._closed:
            raise SinkClosedError("record() on a closed MemorySink")
        entry, _ = self._chain.link(record, self.clock())
        self.entries.append(entry)
        self._unyielded += 1
        if self._unyielded >= RECORD_BATCH:
            self._unyielded = 0
            await trio.lowlevel.cancel_shielded_checkpoint()
        return entry

    async def aclose(self) -> None:
        """Close the sink; later records raise. Idempotent; a checkpoint."""
        self._closed = True
        await trio.lowlevel.checkpoint()

    def statistics(self) -> SinkStatistics:
        """Return a snapshot of the sink's counters."""
        return SinkStatistics(
            recorded=len(self.entries), last_seq=self._chain.seq, closed=self._closed
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<ledger.MemorySink {len(self.entries)} entries {state}>"
