"""JsonlSink: an append-only JSON Lines ledger file."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from hashlib import sha256

import attrs
import trio

from . import _crashpoints
from ._chain import Chain
from ._clock import read_clock, utc_now
from ._encoding import check_content, line_from_body
from ._entry import Entry, Record, Scalar
from ._errors import SinkClosedError, SinkError
from ._fieldline import LARGE, NOT_PLAIN, fields_bytes
from ._jsonl_file import MAX_LINE_BYTES, open_for_append
from ._offload import is_large, redact_in_thread
from ._oserror import describe
from ._redact import redact_record
from ._sink import SinkStatistics, to_path

# Indirection so tests can simulate a full disk.
_write = os.write
_fsync = os.fsync


class _Batch:
    """Records written with one ``write``: what each one came to.

    A plain slotted class: one is made per write, on the hot path of every
    record, and attrs' factories cost a fifth of the write syscall.
    """

    __slots__ = ("outcomes", "records", "waiting")

    def __init__(self, first: tuple[Record, str]) -> None:
        self.records = [first]
        """Redacted records and their times, in the order they were recorded."""
        self.outcomes: list[Entry | SinkError] = []
        """Each record's entry once written, or why it was not."""
        self.waiting: list[trio.lowlevel.Task] = []
        """The tasks parked until the batch is written (all but the first record's)."""


def _cannot_abort(raise_cancel: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
    # A record in a batch is written when the batch's first record runs next (it
    # only yields once, shielded), so waiting for it is not cancelled: a record
    # that is written is acknowledged, as when each record wrote its own line.
    return trio.lowlevel.Abort.FAILED


async def _wait_for(batch: _Batch) -> None:
    """Park until ``batch`` is written; not cancellable (see ``_cannot_abort``)."""
    batch.waiting.append(trio.lowlevel.current_task())
    await trio.lowlevel.wait_task_rescheduled(_cannot_abort)


def _moved_why(stat: os.stat_result, offset: int) -> str | None:
    # Why a file of this stat, of which the sink wrote ``offset`` bytes, can take no
    # more entries (removed, replaced or truncated since it was opened), or None.
    if stat.st_nlink == 0:
        return "the file was removed or replaced since the sink opened it"
    if stat.st_size < offset:
        return (f"the file was truncated since the sink opened it ({stat.st_size} bytes,"
                f" {offset} written)")
    return None


@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class JsonlSink:
    """A sink appending one chained entry a line to a JSON Lines file.

    The file opens on the first record (no I/O here), is created if missing
    (mode 0600), and an existing ledger's chain is continued. The sink holds
    the file's writer lock from then until :meth:`aclose`: a second sink on
    the same file, in this process or another, gets a :class:`SinkError`.

    Group write: the first of concurrent records yields once (as every
    record did), and the records that arrive meanwhile join its batch; then
    it chains the batch (encodes and hashes each entry) and writes it with
    one ``write``, in order, and wakes the others. ``record()`` itself only
    redacts and checks its record, so entries of concurrent tasks never
    interleave. With ``fsync=True``, ``record()`` also waits until an
    ``fsync`` (in a worker thread, shared by concurrent records) has covered
    its entry. :meth:`record_nowait` writes one entry at once, without
    waiting, and :meth:`record_fields_nowait` the same from a recorder's fields,
    with no ``Record`` nor ``Entry`` built (the library's runs record their
    entries through it).

    **An acknowledged entry** (a :meth:`record` call that returned its entry)
    has been written to the file whole, after every entry acknowledged
    before it: it survives the process being killed (SIGKILL), and with
    ``fsync=True`` a power loss. A batch whose write fails is removed from
    the file again: each of its records raises :class:`SinkError` and the
    chain goes on from the last entry written.
    A file removed, renamed over or truncated since the sink opened it takes no
    more entries: every later record raises :class:`SinkError`.

    Args:
      path: The ledger file.
      fsync: Make each entry durable against power loss before returning.
      clock: Returns the time of each entry (UTC ISO-8601 ending in ``Z``).
    """

    path: str = attrs.field(converter=to_path)
    fsync: bool = attrs.field(default=False, kw_only=True)
    clock: Callable[[], str] = attrs.field(default=utc_now, kw_only=True)
    _fd: int | None = attrs.field(default=None, init=False)
    _chain: Chain = attrs.field(factory=Chain, init=False)
    _offset: int = attrs.field(default=0, init=False)
    _open_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _broken: str | None = attrs.field(default=None, init=False)
    _recorded: int = attrs.field(default=0, init=False)
    _fsyncs: int = attrs.field(default=0, init=False)
    _written: int = attrs.field(default=0, init=False)
    _synced: int = attrs.field(default=0, init=False)
    _syncing: bool = attrs.field(default=False, init=False)
    _sync_done: trio.Event = attrs.field(factory=trio.Event, init=False)
    _batch: _Batch | None = attrs.field(default=None, init=False)

    async def _open(self) -> None:
        async with self._open_lock:
            if self._fd is not None or self._closed:
                return
            fd, chain, size = await trio.to_thread.run_sync(open_for_append, self.path)
            if self._closed:
                os.close(fd)
                return
            self._fd, self._chain, self._offset = fd, chain, size
            self._written = self._synced = chain.seq

    async def record(self, record: Record) -> Entry:
        """Redact and check ``record``, then write its entry (chained) in the next
        group write; return the entry. A checkpoint.

        Returns once the line is written (and, with ``fsync=True``, synced).

        Raises:
          SinkError: The file cannot be opened or written (disk full,
            permission denied, another sink writes it, the entry's line
            would be over :data:`MAX_LINE_BYTES`, ...); the entry was not
            recorded.
          SinkClosedError: The sink was closed.
          ValueError: ``record.kind`` is empty, or ``record.duration`` is not finite.
          TypeError: A field of ``record`` cannot be encoded, or the clock returned
            no str.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        record = await redact_in_thread(record) if is_large(record) else redact_record(record)
        if self._fd is None and not self._closed:
            await self._open()
        fd = self._fd
        if fd is None or self._closed:
            raise SinkClosedError(f"record() on a closed JsonlSink ({self.path})")
        if self._broken is not None:
            raise SinkError(self.path, self._broken)
        check_content(record)  # chained in the group write: refuse now what cannot be
        item = (record, read_clock(self.clock))
        batch = self._batch
        if batch is None:
            batch = self._batch = _Batch(item)
            index = 0
            # Let the tasks that are ready join this batch, then write it. No
            # checkpoint between taking the batch and writing it: aclose() waits
            # for self._batch, and nothing else may touch the file meanwhile.
            await trio.lowlevel.cancel_shielded_checkpoint()
            self._batch = None
            self._write_batch(fd, batch)
        else:
            index = len(batch.records)
            batch.records.append(item)
            await _wait_for(batch)
        outcome = batch.outcomes[index]
        if isinstance(outcome, SinkError):
            raise outcome
        if self.fsync:
            await self._sync_through(fd, outcome.seq)
        self._recorded += 1
        return outcome

    def record_nowait(self, record: Record) -> Entry:
        """Redact and check ``record`` and write its entry (chained) now, with one
        ``write``; return the entry. Not a checkpoint: it neither yields nor checks
        for cancellation.

        The synchronous form of :meth:`record` for recorders on a hot path (the
        library's runs use it when a sink offers it, see :class:`ledger.Sink`): the
        same checks and errors, and an acknowledged entry (this call returned) means
        what it means for :meth:`record`: its line is in the file, after every entry
        acknowledged before it. The write is the one :meth:`record` makes inline for
        its batch (a short append to the page cache); what needs a wait is left to
        :meth:`record`.

        Raises:
          trio.WouldBlock: Nothing was recorded, call :meth:`record`: the sink syncs
            (``fsync=True``, which waits for a worker thread), its file is not open
            yet (opening it is a worker thread's), it is of a subclass that
            overrides :meth:`record` (whose override the recorders must call), or
            ``record`` holds more than 64 KiB of text (redacted in a worker thread).
          SinkError, SinkClosedError, ValueError, TypeError: as :meth:`record`.
        """
        fd = self._fd
        if (
            self.fsync
            or (fd is None and not self._closed)
            or type(self).record is not JsonlSink.record  # a subclass's own record() is called
            or is_large(record)
        ):
            raise trio.WouldBlock
        record = redact_record(record)
        if fd is None or self._closed:
            raise SinkClosedError(f"record() on a closed JsonlSink ({self.path})")
        if self._broken is not None:
            raise SinkError(self.path, self._broken)
        check_content(record)
        batch = _Batch((record, read_clock(self.clock)))
        self._write_batch(fd, batch)
        outcome = batch.outcomes[0]
        if isinstance(outcome, SinkError):
            raise outcome
        self._recorded += 1
        return outcome

    def record_fields_nowait(
        self, kind: str, run_id: str, path: tuple[str, ...], agent_id: str,
        tool: str | None, call_id: str | None, arguments: str | None, verdict: str | None,
        reason: str | None, result: str | None, error: str | None,
        duration: float | None, data: Mapping[str, Scalar] | None,
    ) -> None:
        """:meth:`record_nowait` of the record of these fields (in ``Record``'s order;
        ``data`` a dict or ``None``), without building the :class:`Record` nor its
        :class:`Entry`: the same line, chain, checks, errors and acknowledged entry.
        Returns ``None``. Not a checkpoint.

        A plain record (every field of the exact type the encoder takes without
        question) is redacted and encoded straight from its fields
        (:mod:`ledger._fieldline`), hashed once and written with one ``write``; any
        other is built with ``Record(...)`` (its converters' errors) and recorded by
        :meth:`record_nowait`.

        Raises:
          trio.WouldBlock, SinkError, SinkClosedError, ValueError, TypeError: as
            :meth:`record_nowait`.
        """
        fd = self._fd
        cls = type(self)
        if (
            self.fsync
            or fd is None
            or self._closed
            or self._broken is not None
            or (cls is not JsonlSink and (
                cls.record is not JsonlSink.record
                or cls.record_nowait is not JsonlSink.record_nowait
            ))
        ):
            # The record_nowait path says which (WouldBlock, closed, broken).
            self.record_nowait(Record(
                kind, run_id, path, agent_id, tool, call_id, arguments, verdict, reason,
                result, error, duration, {} if data is None else data,
            ))
            return
        chain = self._chain
        seq = chain.seq + 1
        when = self.clock()  # read_clock, inline; the Record path raises its TypeError
        if type(when) is not str:
            when = str.__str__(when) if isinstance(when, str) else NOT_PLAIN
        encoded = when and fields_bytes(
            seq, when, chain.head, kind, run_id, path, agent_id, tool, call_id,
            arguments, verdict, reason, result, error, duration, data,
        )
        if type(encoded) is not bytes:
            if encoded is LARGE:
                raise trio.WouldBlock
            self.record_nowait(Record(
                kind, run_id, path, agent_id, tool, call_id, arguments, verdict, reason,
                result, error, duration, {} if data is None else data,
            ))
            return
        digest = sha256(encoded).hexdigest()
        line = b"%s,\"hash\":\"%s\"}\n" % (encoded[:-1], digest.encode("ascii"))
        if len(line) > MAX_LINE_BYTES + 1:
            raise SinkError(
                self.path,
                f"the entry's line would be {len(line) - 1} bytes, over the"
                f" {MAX_LINE_BYTES}-byte limit of a ledger line",
            )
        # _moved and _append, inline for the common case (a frame each per entry).
        try:
            stat = os.fstat(fd)
        except OSError as exc:
            broken: str | None = describe(exc)
        else:
            broken = None if stat.st_nlink and stat.st_size >= self._offset else (
                _moved_why(stat, self._offset))
        if broken is not None:
            self._broken = broken
            raise SinkError(self.path, broken)
        if _crashpoints.ON:
            cause = self._append(fd, line)
        else:
            try:
                done = _write(fd, line)
            except OSError as exc:
                cause = describe(exc)  # nothing written
            else:
                if done == len(line):
                    self._offset += done
                    cause = None
                else:
                    cause = self._append(fd, line, done)
        if cause is not None:
            raise SinkError(self.path, cause)
        chain.seq = self._written = seq
        chain.head = digest
        self._recorded += 1

    def _write_batch(self, fd: int, batch: _Batch) -> None:
        """Chain a batch's records, write their lines with one ``write``, and
        wake its recorders. Not a checkpoint; never raises."""
        outcomes = batch.outcomes
        try:
            broken = self._broken or self._moved(fd)
            if broken is not None:
                self._broken = broken
                outcomes += [SinkError(self.path, broken) for _ in batch.records]
                return
            chain = self._chain
            start = (chain.seq, chain.head)
            lines: list[bytes] = []
            for record, when in batch.records:
                entry, body = chain.link(record, when)
                data = f"{line_from_body(body, entry.hash)}\n".encode("utf-8", "surrogatepass")
                if len(data) > MAX_LINE_BYTES + 1:
                    chain.rewind(entry.seq - 1, entry.prev_hash)
                    outcomes.append(SinkError(
                        self.path,
                        f"the entry's line would be {len(data) - 1} bytes, over the"
                        f" {MAX_LINE_BYTES}-byte limit of a ledger line",
                    ))
                    continue
                lines.append(data)
                outcomes.append(entry)
            if not lines:
                return
            cause = self._append(fd, lines[0] if len(lines) == 1 else b"".join(lines))
            if cause is None:
                self._written = chain.seq
                return
            chain.rewind(*start)
            for k, outcome in enumerate(outcomes):
                if isinstance(outcome, Entry):
                    outcomes[k] = SinkError(self.path, cause)
        finally:
            for task in batch.waiting:
                trio.lowlevel.reschedule(task)

    def _moved(self, fd: int) -> str | None:
        """Why the file can no longer take entries, if it was removed, replaced (a
        rename over it) or truncated since it was opened; else ``None``. One
        ``fstat``: whatever is written to a removed file is lost when the sink closes,
        and entries after a cut would chain to entries no longer there."""
        try:
            stat = os.fstat(fd)
        except OSError as exc:
            return describe(exc)
        return _moved_why(stat, self._offset)

    def _append(self, fd: int, data: bytes, done: int = 0) -> str | None:
        """Write ``data`` whole (its first ``done`` bytes are written already), or undo
        the part written; ``None``, or why it failed."""
        k = _crashpoints.before(f"jsonl ledger: {data.count(10)} entries") if (
            _crashpoints.ON and not done) else 0
        try:
            while done < len(data):
                done += _write(fd, data[done:] if done else data)
        except OSError as exc:
            cause = describe(exc)
            if done:
                try:
                    os.ftruncate(fd, self._offset)
                except OSError as undo:
                    self._broken = (
                        f"{cause}, and a partly written line could not be removed"
                        f" ({describe(undo)}); run `python -m ledger repair {self.path}`"
                    )
            return cause
        self._offset += done
        if k:
            _crashpoints.after(k)
        return None

    async def _sync_through(self, fd: int, seq: int) -> None:
        """Wait until an fsync that started after entry ``seq`` was written is done.

        The first waiting task runs the fsync in a worker thread for everyone
        waiting (group sync).
        """
        while self._synced < seq:
            if self._syncing:
                await self._sync_done.wait()
                continue
            if self._fd is None:
                raise SinkClosedError(
                    f"JsonlSink ({self.path}) closed before entry {seq} was synced"
                )
            self._syncing = True
            target = self._written
            done = self._sync_done
            try:
                await trio.to_thread.run_sync(_fsync, fd)
            except OSError as exc:
                raise SinkError(self.path, f"fsync failed: {describe(exc)}") from exc
            else:
                self._fsyncs += 1
                self._synced = max(self._synced, target)
            finally:
                self._syncing = False
                self._sync_done = trio.Event()
                done.set()

    async def aclose(self) -> None:
        """Close the file (after a last fsync, with ``fsync=True``).

        Idempotent; a checkpoint. Later records raise :class:`SinkClosedError`.
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        self._closed = True
        with trio.CancelScope(shield=True):
            if self._batch is not None:  # accepted before the close: written first
                await _wait_for(self._batch)
            while self._syncing:
                await self._sync_done.wait()
            fd = self._fd
            if fd is not None:
                if self.fsync and self._synced < self._written:
                    try:
                        await trio.to_thread.run_sync(_fsync, fd)
                    except OSError:
                        pass  # the waiting records raise; closing still closes
                    else:
                        self._fsyncs += 1
                        self._synced = self._written
                self._fd = None
                os.close(fd)
                done, self._sync_done = self._sync_done, trio.Event()
                done.set()
        await trio.lowlevel.checkpoint()

    def statistics(self) -> SinkStatistics:
        """Return a snapshot of the sink's counters."""
        return SinkStatistics(
            recorded=self._recorded,
            last_seq=self._chain.seq,
            fsyncs=self._fsyncs,
            closed=self._closed,
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._fd is not None else "unopened"
        return f"<ledger.JsonlSink {self.path!r} seq={self._chain.seq} {state}>"
