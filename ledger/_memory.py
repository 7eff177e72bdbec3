"""MemorySink: a chained ledger held in a list (tests, and the hot path)."""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs
import trio

from ._chain import Chain
from ._clock import utc_from_ns, utc_now
from ._encoding import check_content
from ._entry import Entry, Record
from ._errors import SinkClosedError
from ._offload import is_large, redact_in_thread
from ._redact import redact_record
from ._sink import SinkStatistics

#: The most records :meth:`MemorySink.record` stores in a row without yielding to
#: the scheduler (it still checks for cancellation on every call).
RECORD_BATCH = 64


@attrs.frozen
class _Redacted:
    """A pending record already redacted (a large one, redacted in a worker thread)."""

    record: Record


@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class MemorySink:
    """A sink that keeps entries in memory, in order, in :attr:`entries`.

    Entries are redacted and chained exactly as the file sinks do it, but
    both are done lazily: :meth:`record` checks that the record can be
    encoded, takes its time and appends the record, as it is, to a list of
    pending records; reading :attr:`entries` redacts and chains every pending
    record, in order, into entries (the same entries, with the same hashes,
    as redacting and chaining each one when it was recorded: redaction is a
    pure function of the record), and keeps them. An entry is therefore built
    only if someone reads it, and a run that records ten entries pays for a
    type check, a clock reading and two list appends on its hot path.
    Records of more than 64 KiB of text are the exception: they are redacted
    in a worker thread when recorded, so that a read never redacts a large
    text on the event loop.

    **An acknowledged entry** (a :meth:`record` call that returned) is in
    this sink's memory at its place in the order of acknowledged entries,
    with the time it was recorded: every later read of :attr:`entries` holds
    it there, redacted and chained. Until the first read after it, the
    record is held as the recorder gave it (unredacted, in this process's
    memory only: nothing outside the sink can read it, and nothing survives
    the process). A record that cannot be encoded is refused by
    :meth:`record` with the encoder's error, never at read time.

    Args:
      clock: Returns the time of each entry (UTC ISO-8601 ending in ``Z``);
        tests pass a fixed one. It is called when the record is recorded;
        the default clock's reading is taken then too and only formatted
        when the entry is built.
    """

    clock: Callable[[], str] = utc_now
    _entries: list[Entry] = attrs.field(factory=list, init=False)
    # Records acknowledged but not chained yet (raw, or _Redacted when large), and
    # beside them their times: a str from a custom clock, or time.time_ns() for the
    # default one (formatted when chained). Two flat lists, not a list of pairs:
    # one object fewer per entry for the allocator and the garbage collector.
    _pending: list[Record | _Redacted] = attrs.field(factory=list, init=False)
    _times: list[str | int] = attrs.field(factory=list, init=False)
    _chain: Chain = attrs.field(factory=Chain, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _unyielded: int = attrs.field(default=0, init=False)

    @property
    def entries(self) -> list[Entry]:
        """The recorded entries, in order (chaining the records not chained yet).

        Not a checkpoint; costs one chain link per record recorded since the
        last read. The list is the sink's own: do not change it.
        """
        if self._pending:
            self._settle()
        return self._entries

    def _settle(self) -> None:
        pending, self._pending = self._pending, []
        times, self._times = self._times, []
        link = self._chain.link
        append = self._entries.append
        for item, when in zip(pending, times, strict=True):
            record = item.record if isinstance(item, _Redacted) else redact_record(item)
            # Cannot fail: record() checked each record with check_content, and
            # redaction only replaces text with text.
            entry, _ = link(record, when if isinstance(when, str) else utc_from_ns(when))
            append(entry)

    async def record(self, record: Record) -> None:
        """Check ``record`` and append it to the pending records.

        Its entry is built (redacted and chained) when :attr:`entries` is next
        read; the entry is the same as if it had been built here. Returns
        ``None`` (the :class:`~ledger.Sink` protocol allows it): use
        :attr:`entries`. A record of more than 64 KiB of text is redacted now,
        in a worker thread.

        It always checks for cancellation (a cancelled call records nothing),
        but since appending to a list never blocks, it yields to the scheduler
        only once every :data:`RECORD_BATCH` records: a yield per record was
        a large part of the audit's cost on the hot path, and a task that
        records in a loop still cannot starve the others.

        Raises:
          SinkClosedError: The sink was closed.
          ValueError: ``record.kind`` is empty, or ``record.duration`` is not finite.
          TypeError: A field of ``record`` cannot be encoded.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._closed:
            raise SinkClosedError("record() on a closed MemorySink")
        try:
            check_content(record)
        except (TypeError, ValueError):
            # Raise what redacting, then encoding, raises (as the file sinks do).
            check_content(redact_record(record))
            raise
        item: Record | _Redacted = record
        if is_large(record):
            item = _Redacted(await redact_in_thread(record))
            if self._closed:
                raise SinkClosedError("record() on a closed MemorySink")
        clock = self.clock
        self._times.append(time.time_ns() if clock is utc_now else clock())
        self._pending.append(item)
        self._unyielded += 1
        if self._unyielded >= RECORD_BATCH:
            self._unyielded = 0
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def aclose(self) -> None:
        """Close the sink; later records raise. Idempotent; a checkpoint.

        The entries recorded stay readable.
        """
        self._closed = True
        await trio.lowlevel.checkpoint()

    def statistics(self) -> SinkStatistics:
        """Return a snapshot of the sink's counters (chains nothing)."""
        recorded = len(self._entries) + len(self._pending)
        return SinkStatistics(
            recorded=recorded, last_seq=self._chain.seq + len(self._pending), closed=self._closed
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        count = len(self._entries) + len(self._pending)
        return f"<ledger.MemorySink {count} entries {state}>"
