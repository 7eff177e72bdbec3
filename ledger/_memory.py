"""MemorySink: a chained ledger held in a list (tests, and the hot path)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from math import isfinite
from types import MappingProxyType
from typing import Any

import attrs
import trio

from ._chain import Chain
from ._clock import read_clock, utc_from_ns, utc_now
from ._encoding import _BIG_INT_BITS, check_content
from ._entry import Entry, Record, Scalar
from ._errors import SinkClosedError
from ._offload import OFFLOAD_CHARS, is_large, redact_in_thread
from ._record import record_from_fields
from ._redact import redact_record
from ._sink import SinkStatistics

#: The most records :meth:`MemorySink.record` stores in a row without yielding to
#: the scheduler (it still checks for cancellation on every call).
RECORD_BATCH = 64

# An int the encoder spells without question (check_content spells wider ones).
_INT_MAX = 1 << _BIG_INT_BITS
_INT_MIN = -_INT_MAX

# Every pending record takes _WIDTH consecutive items of the pending list. A plain
# one: its 13 fields in Record's order (its data a copy, or None for none), then its
# time; its kind (an exact str) starts it. Any other: the Record itself (not a str),
# whether it is redacted already, _PAD, then its time.
_WIDTH = 14
_PAD = (None,) * (_WIDTH - 3)


def _reader(clock: Callable[[], str]) -> Callable[[], str | int]:
    # What a MemorySink reads an entry's time with: time.time_ns for the default
    # clock (its reading, formatted when the entry is built), else the clock through
    # read_clock (a str, or its TypeError). One call per entry, no test of the clock.
    return time.time_ns if clock is utc_now else functools.partial(read_clock, clock)


@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class MemorySink:
    """A sink that keeps entries in memory, in order, in :attr:`entries`.

    Entries are redacted and chained exactly as the file sinks do it, but
    both are done lazily: :meth:`record` checks that the record can be
    encoded, takes its time and appends the record's fields (with a copy of
    its data) to a list of pending records; reading :attr:`entries` rebuilds
    each pending record, redacts and chains it, in order, into entries (the
    same entries, with the same hashes, as redacting and chaining each one
    when it was recorded: redaction is a pure function of the record), and
    keeps them. An entry is therefore built only if someone reads it, and a
    run that records ten entries pays for one pass of type checks over each
    record, a clock reading and a list append on its hot path.
    Records of more than 64 KiB of text are the exception: they are redacted
    in a worker thread when recorded, so that a read never redacts a large
    text on the event loop.

    Recording never blocks (bar those large records), so the sink also
    offers :meth:`record_nowait`: the same record, synchronously, and **not
    a checkpoint**. Product decision (issue 17): an audit entry recorded into
    a sink that never blocks need not be a trio checkpoint; ``agentcore``
    and ``subagent`` call :meth:`record_nowait` when a sink offers it
    (checking for cancellation first where a cancelled recorder must record
    nothing) and ``await sink.record(...)`` otherwise. Any sink may opt in
    by offering a ``record_nowait`` with the same contract. A subclass that
    overrides :meth:`record` has its override awaited for every entry (the
    inherited fast paths are not taken: see :class:`ledger.Sink`).

    **An acknowledged entry** (a :meth:`record` or :meth:`record_nowait`
    call that returned) is in this sink's memory at its place in the order
    of acknowledged entries (the order in which those calls returned), with
    the time it was recorded: every later read of :attr:`entries` holds it
    there, redacted and chained. Until the first read after it, the record
    is held as the recorder gave it (unredacted, in this process's memory
    only: nothing outside the sink can read it, and nothing survives the
    process). A call that raised recorded nothing. A record that cannot be
    encoded is refused by either call with the encoder's error, never at
    read time; so is every record once the sink is closed.

    Args:
      clock: Returns the time of each entry (UTC ISO-8601 ending in ``Z``);
        tests pass a fixed one. It is called when the record is recorded;
        the default clock's reading is taken then too and only formatted
        when the entry is built.
    """

    _clock: Callable[[], str] = attrs.field(default=utc_now, alias="clock")
    # What an entry's time is read with (see _reader), set with the clock.
    _now: Callable[[], str | int] = attrs.field(init=False, default=time.time_ns)
    _entries: list[Entry] = attrs.field(factory=list, init=False)
    # Records acknowledged but not chained yet, in order, in one flat list, _WIDTH
    # items each. A plain record (every field of the exact type the encoder takes
    # without question) is kept as its 13 fields, its data a copy (a dict: the
    # caller's dict may change afterwards without changing the entry), then its time
    # (time.time_ns() for the default clock, formatted when chained; a str from a
    # custom clock). Any other record is kept as it was given (see _PAD). A record
    # rebuilt from its items equals the one recorded. One width for every record:
    # recording builds one tuple of the fields it was given, and how many records
    # are waiting is the list's length over the width (no count to keep per entry).
    # The data's copy is a dict kept per entry with data, which the garbage
    # collector counts (W1: 57 young collections per 2,000 runs instead of 40,
    # ~0.7 us per run) but does not track (its values are scalars); keeping its keys
    # and values in the list instead cost more than that (issue 17, bench/README).
    _pending: list[object] = attrs.field(factory=list, init=False)
    # The last path checked (a tuple of str: it cannot change), so that the many
    # entries of one run check their shared path once.
    _path: tuple[str, ...] = attrs.field(default=(), init=False)
    _chain: Chain = attrs.field(factory=Chain, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _unyielded: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        self._now = _reader(self._clock)

    @property
    def clock(self) -> Callable[[], str]:
        """The clock entries are timed by (see the class's arguments); settable."""
        return self._clock

    @clock.setter
    def clock(self, clock: Callable[[], str]) -> None:
        self._clock = clock
        self._now = _reader(clock)

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
        # Chain the pending records into entries, in order.
        pending: list[Any] = self._pending
        self._pending = []
        entries = self._entries
        link = self._chain.link
        i, n = 0, len(pending)
        try:
            while i < n:
                item = pending[i]
                when = pending[i + _WIDTH - 1]
                if type(item) is str:
                    record = redact_record(record_from_fields(*pending[i:i + 13]))
                else:
                    record = item if pending[i + 1] else redact_record(item)
                # Cannot fail: recording checked each record (check_content, or the
                # same checks inline), and redaction only replaces text with text.
                entry, _ = link(record, when if isinstance(when, str) else utc_from_ns(when))
                entries.append(entry)
                i += _WIDTH
        except BaseException:
            # Should it fail all the same, this read raises, and every record not
            # chained stays pending, in order, before any recorded since: none is lost.
            self._pending[:0] = pending[i:]
            raise

    def record_nowait(self, record: Record) -> None:
        """Check ``record`` and append it to the pending records, without waiting.

        The synchronous form of :meth:`record`, for recorders on a hot path (the
        library's runs and tasks use it when a sink offers it): the same checks,
        in the same order, with the same errors, and an acknowledged entry (this
        call returned) means exactly what it means for :meth:`record`. Recording
        into this sink never blocks, so an entry recorded this way is **not a
        checkpoint**: it neither yields to the scheduler nor checks for
        cancellation (a caller that wants "a cancelled recorder records
        nothing" checks first: ``agentcore`` does, with
        :func:`trio.lowlevel.checkpoint_if_cancelled`). The order of entries is
        the order of the calls that returned, through either method.

        Raises:
          trio.WouldBlock: ``record`` holds more than 64 KiB of text: it is
            redacted in a worker thread, which only :meth:`record` can wait for.
            Nothing was recorded; call :meth:`record`.
          SinkClosedError: The sink was closed.
          ValueError: ``record.kind`` is empty, or ``record.duration`` is not finite.
          TypeError: A field of ``record`` cannot be encoded, or the clock returned
            no str.
        """
        r = record
        self.record_fields_nowait(
            r.kind, r.run_id, r.path, r.agent_id, r.tool, r.call_id, r.arguments,
            r.verdict, r.reason, r.result, r.error, r.duration, r.data,
        )

    def record_fields_nowait(
        self,
        kind: str,
        run_id: str,
        path: tuple[str, ...],
        agent_id: str,
        tool: str | None,
        call_id: str | None,
        arguments: str | None,
        verdict: str | None,
        reason: str | None,
        result: str | None,
        error: str | None,
        duration: float | None,
        data: Mapping[str, Scalar] | None,
    ) -> None:
        """:meth:`record_nowait` of the record of these fields, without the record:
        ``record_nowait(Record(kind, run_id, path, ...))``, with the same checks,
        errors and acknowledged entry, but no :class:`Record` built for a plain
        one (the common case: a recorder's own fields). Not a checkpoint.

        The fields come in ``Record``'s order. ``data`` is a dict, a ``Record``'s
        read-only data, or ``None`` for none; it is copied into a dict of the
        sink's own (a change to the dict afterwards does not change the entry).
        A recorder on a hot path offers its entries this way (``agentcore`` does
        when a sink has this method), so that a run's entry is checked and kept
        in one call: no ``Record`` is built, and its data is checked once.

        Raises:
          trio.WouldBlock, SinkClosedError, ValueError, TypeError: as :meth:`record_nowait`.
        """
        if self._closed:
            raise SinkClosedError("record() on a closed MemorySink")
        # The checks of check_content (and Record's of data) and the size is_large
        # counts, in one pass over the fields, for a record whose every field has the
        # exact type the encoder takes without question (str, a tuple of str, a
        # finite float, ints short enough to spell, a dict or read-only dict of
        # those with str keys): such a record is kept flat. Anything else is built
        # into a Record and held as it is (_hold_fields: Record's converters,
        # check_content and is_large themselves, their errors).
        plain = not (
            type(kind) is not str or not kind
            or type(run_id) is not str
            or type(agent_id) is not str
            or (verdict is not None and type(verdict) is not str)
            or (duration is not None and (type(duration) is not float or not isfinite(duration)))
        )
        # The path: a tuple of str, remembered (as the last path checked) when it is.
        # Inline, not a method: entries of concurrent runs interleave, so about
        # every third entry of a W1 run checks its path.
        if path is not self._path:
            if type(path) is tuple:
                for seg in path:
                    if type(seg) is not str:
                        plain = False
                        break
                else:
                    self._path = path
            else:
                plain = False
        # Each optional text: None, or a str counted.
        size = 0
        if tool is not None:
            if type(tool) is str:
                size = len(tool)
            else:
                plain = False
        if call_id is not None:
            if type(call_id) is str:
                size += len(call_id)
            else:
                plain = False
        if arguments is not None:
            if type(arguments) is str:
                size += len(arguments)
            else:
                plain = False
        if reason is not None:
            if type(reason) is str:
                size += len(reason)
            else:
                plain = False
        if result is not None:
            if type(result) is str:
                size += len(result)
            else:
                plain = False
        if error is not None:
            if type(error) is str:
                size += len(error)
            else:
                plain = False
        if not data:
            data = None
        elif type(data) is not dict and type(data) is not MappingProxyType:
            plain = False
        else:
            # Checked and kept as a copy, always a dict (read-only data's own copy()
            # is its mapping's): a change to the caller's dict changes no entry.
            data = data.copy() if type(data) is dict else dict(data)
            for key, value in data.items():
                kind_of = type(value)
                if type(key) is not str:
                    plain = False
                elif kind_of is str:
                    size += len(value)
                elif kind_of is int:
                    if not _INT_MIN < value < _INT_MAX:
                        plain = False
                elif kind_of is float:
                    if not isfinite(value):
                        plain = False
                elif kind_of is not bool and value is not None:
                    plain = False
        if not plain:
            return self._hold_fields(
                kind, run_id, path, agent_id, tool, call_id, arguments, verdict, reason,
                result, error, duration, data,
            )
        if size > OFFLOAD_CHARS:
            raise trio.WouldBlock
        # The time first: ``self._pending += (..., self._now())`` would load the list
        # before calling the clock, and a clock that reads the entries replaces it
        # (_settle), so the record would extend, and put back, the list just chained.
        when = self._now()
        self._pending += (
            kind, run_id, path, agent_id, tool, call_id, arguments, verdict, reason,
            result, error, duration, data, when,
        )
        return None

    def _hold_fields(
        self, kind: str, run_id: str, path: tuple[str, ...], agent_id: str,
        tool: str | None, call_id: str | None, arguments: str | None, verdict: str | None,
        reason: str | None, result: str | None, error: str | None,
        duration: float | None, data: Mapping[str, Scalar] | None,
    ) -> None:
        # A record that is not plain: built by Record's own constructor (its
        # converters copy and check path and data, with Record's errors; for fields
        # taken from a Record they build an equal one), then held as it is.
        self._hold(Record(
            kind, run_id, path, agent_id, tool, call_id, arguments, verdict, reason,
            result, error, duration, {} if data is None else data,
        ))

    def _hold(self, record: Record) -> None:
        # record_nowait for a record that is not plain: checked by check_content
        # and is_large themselves, and held as it is.
        try:
            check_content(record)
        except (TypeError, ValueError):
            # Raise what redacting, then encoding, raises (as the file sinks do).
            check_content(redact_record(record))
            raise
        if is_large(record):
            raise trio.WouldBlock
        when = self._now()  # before the list is loaded (see record_fields_nowait)
        self._pending += (record, False, *_PAD, when)

    async def record(self, record: Record) -> None:
        """Check ``record`` and append it to the pending records.

        Its entry is built (redacted and chained) when :attr:`entries` is next
        read; the entry is the same as if it had been built here. Returns
        ``None`` (the :class:`~ledger.Sink` protocol allows it): use
        :attr:`entries`. A record of more than 64 KiB of text is redacted now,
        in a worker thread. :meth:`record_nowait` does the same without
        awaiting (for all but those large records).

        It always checks for cancellation (a cancelled call records nothing),
        but since appending to a list never blocks, it yields to the scheduler
        only once every :data:`RECORD_BATCH` records: a yield per record was
        a large part of the audit's cost on the hot path, and a task that
        records in a loop still cannot starve the others.

        Raises:
          SinkClosedError: The sink was closed.
          ValueError: ``record.kind`` is empty, or ``record.duration`` is not finite.
          TypeError: A field of ``record`` cannot be encoded, or the clock returned
            no str.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self.record_nowait(record)
            large = False
        except trio.WouldBlock:
            large = True
        if large:
            # The record redacted (and held) must be the one checked: record_nowait
            # read its fields, and a Record subclass may read differently the next
            # time (a finite duration, then NaN: an entry its read would refuse,
            # pending in front of every later one). So the fields are read once more,
            # into a Record of the sink's own (its converters copy path and data),
            # which is checked and redacted. Only for a large record (O(fields)).
            r = record
            record = Record(
                r.kind, r.run_id, r.path, r.agent_id, r.tool, r.call_id, r.arguments,
                r.verdict, r.reason, r.result, r.error, r.duration, r.data,
            )
            try:
                self.record_nowait(record)
                large = False
            except trio.WouldBlock:
                pass
        if large:
            redacted = await redact_in_thread(record)
            if self._closed:
                raise SinkClosedError("record() on a closed MemorySink")
            when = self._now()  # before the list is loaded (see record_fields_nowait)
            self._pending += (redacted, True, *_PAD, when)
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
        waiting = len(self._pending) // _WIDTH
        return SinkStatistics(
            recorded=len(self._entries) + waiting, last_seq=self._chain.seq + waiting,
            closed=self._closed
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        count = len(self._entries) + len(self._pending) // _WIDTH
        return f"<ledger.MemorySink {count} entries {state}>"
