"""SqliteSink: a ledger in an SQLite database, written by one thread with group commit."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence

import attrs
import trio

from . import _crashpoints
from ._chain import Chain
from ._clock import read_clock, utc_now
from ._encoding import GENESIS, check_content, entry_hash
from ._entry import Entry, Record
from ._errors import SinkClosedError, SinkError
from ._files import LOCKED, FileId, create_regular, lock_path, open_checked, open_private, try_lock
from ._offload import is_large, redact_in_thread
from ._oserror import describe
from ._query import query
from ._redact import redact_record
from ._sink import SinkStatistics, to_path
from ._sqlite_store import INSERT, check_storable, connect, last_entry, to_row


@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class _Batch:
    """Records committed in one transaction, and how that went."""

    records: list[tuple[Record, str]] = attrs.Factory(list)
    """Redacted records and their times, in the order they were recorded."""
    entries: list[Entry] = attrs.Factory(list)
    """Their entries, chained by the writer thread."""
    done: trio.Event = attrs.Factory(trio.Event)
    cause: str | None = None
    """Why the batch was not committed; ``None`` once it was."""


@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class SqliteSink:
    """A sink storing entries in an SQLite database (stdlib ``sqlite3``, WAL).

    The database opens on the first record (no I/O here), is created if
    missing (mode 0600, which SQLite gives its ``-wal`` and ``-shm`` files
    too), and an existing ledger's chain is continued. The sink holds the
    writer lock ``<path>-lock`` from then until :meth:`aclose`: a second
    sink on the same database, in this process or another, gets a
    :class:`SinkError`. One writer thread,
    owned by the sink and stopped by :meth:`aclose`, does every database
    operation; records that arrive while it commits are committed together
    in its next transaction (group commit). The writer thread also chains
    them (encodes and hashes each entry), so the trio thread only redacts
    and checks a record and hands it over. Entries chain exactly as in a
    JSON Lines ledger.

    **An acknowledged entry** (a :meth:`record` call that returned its entry)
    is in a committed transaction, chained after every entry acknowledged
    before it: it survives the process being killed (and, with
    ``fsync=True``, a power loss). A batch whose commit fails is not stored
    at all: each of its records raises :class:`SinkError`, and the chain
    goes on from the last committed entry.

    Args:
      path: The database file.
      fsync: ``synchronous=FULL`` (durable against power loss) rather than
        ``NORMAL`` (durable against the process being killed).
      busy_timeout: Seconds to wait for a lock held by another connection
        before a commit fails with "database is locked".
      clock: Returns the time of each entry (UTC ISO-8601 ending in ``Z``).
    """

    path: str = attrs.field(converter=to_path)
    fsync: bool = attrs.field(default=False, kw_only=True)
    busy_timeout: float = attrs.field(default=5.0, kw_only=True)
    clock: Callable[[], str] = attrs.field(default=utc_now, kw_only=True)
    _chain: Chain = attrs.field(factory=Chain, init=False)
    _open_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _thread: threading.Thread | None = attrs.field(default=None, init=False)
    _token: trio.lowlevel.TrioToken | None = attrs.field(default=None, init=False)
    _stopped: trio.Event = attrs.field(factory=trio.Event, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _recorded: int = attrs.field(default=0, init=False)
    # Shared with the writer thread, under _lock.
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _wakeup: threading.Condition = attrs.field(init=False)
    _pending: _Batch | None = attrs.field(default=None, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    # Owned by the writer thread (the trio thread reads _chain.seq for statistics).
    _committed: tuple[int, str] = attrs.field(default=(0, GENESIS), init=False)
    _transactions: int = attrs.field(default=0, init=False)

    @_wakeup.default
    def _make_wakeup(self) -> threading.Condition:
        return threading.Condition(self._lock)

    # -- trio side ---------------------------------------------------------------------

    async def _open(self) -> None:
        async with self._open_lock:
            if self._thread is not None or self._closed:
                return
            token = trio.lowlevel.current_trio_token()
            opened = trio.Event()
            outcome: list[str | Entry | None] = []

            def report(result: str | Entry | None) -> None:
                outcome.append(result)
                token.run_sync_soon(opened.set)

            thread = threading.Thread(
                target=self._run, args=(report,), name=f"ledger writer {self.path}", daemon=True
            )
            self._token = token
            self._stopped = trio.Event()
            thread.start()
            with trio.CancelScope(shield=True):
                await opened.wait()
            [result] = outcome
            if isinstance(result, str):
                thread.join()
                raise SinkError(self.path, result)
            self._thread = thread

    async def record(self, record: Record) -> Entry:
        """Redact and check ``record``, hand it to the writer thread, and return
        its entry once the writer has chained and committed it.

        A checkpoint. Concurrent records share transactions.

        Raises:
          SinkError: The database cannot be opened or written (disk full,
            permission denied, database locked, ...); the entry was not
            recorded.
          SinkClosedError: The sink was closed.
          ValueError: ``record.kind`` is empty, or ``record.duration`` is not finite.
          TypeError: A field of ``record`` cannot be encoded, or the clock returned
            no str.
          UnicodeEncodeError: A text of ``record`` is not valid UTF-8 (a lone
            surrogate), which SQLite cannot store.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        record = await redact_in_thread(record) if is_large(record) else redact_record(record)
        if self._thread is None and not self._closed:
            await self._open()
        if self._closed:
            raise SinkClosedError(f"record() on a closed SqliteSink ({self.path})")
        check_content(record)  # the writer thread links it: refuse now what cannot be
        when = read_clock(self.clock)
        check_storable(record, when)  # alone, now: not the batch's commit
        with self._lock:
            batch = self._pending
            if batch is None:
                batch = self._pending = _Batch()
                self._wakeup.notify()
            index = len(batch.records)
            batch.records.append((record, when))
        await batch.done.wait()
        if batch.cause is not None:
            raise SinkError(self.path, batch.cause)
        self._recorded += 1
        return batch.entries[index]

    async def aclose(self) -> None:
        """Commit what is pending, stop the writer thread and close the database.

        Idempotent; a checkpoint. Later records raise :class:`SinkClosedError`.
        """
        if not self._closed:
            self._closed = True
            with trio.CancelScope(shield=True):
                async with self._open_lock:  # let an opening finish, then stop it
                    pass
                if self._thread is not None:
                    with self._lock:
                        self._closing = True
                        self._wakeup.notify()
                    await self._stopped.wait()
        await trio.lowlevel.checkpoint()

    async def query(
        self,
        *,
        path_prefix: Sequence[str] | None = None,
        run_id: str | None = None,
        kind: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
    ) -> list[Entry]:
        """Return committed entries matching every filter (see :func:`ledger.query`).

        Reads through its own connection in a worker thread. A checkpoint.
        """
        return await trio.to_thread.run_sync(
            lambda: query(
                self.path,
                path_prefix=path_prefix,
                run_id=run_id,
                kind=kind,
                since=since,
                until=until,
                limit=limit,
            )
        )

    def statistics(self) -> SinkStatistics:
        """Return a snapshot of the sink's counters."""
        return SinkStatistics(
            recorded=self._recorded,
            last_seq=self._chain.seq,
            transactions=self._transactions,
            closed=self._closed,
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._thread else "unopened"
        return f"<ledger.SqliteSink {self.path!r} seq={self._chain.seq} {state}>"

    # -- the writer thread ---------------------------------------------------------------

    def _notify(self, fn: Callable[[], object]) -> None:
        assert self._token is not None
        # After the run ended nobody is left to wake.
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(fn)

    def _run(self, report: Callable[[str | Entry | None], None]) -> None:
        try:
            # Created here, 0600, so that SQLite gives its -wal and -shm files the same
            # mode; and refused, before a lock file is made beside it, unless regular.
            checked = create_regular(self.path)
            lock = open_private(lock_path(self.path), os.O_RDWR)
        except OSError as exc:
            report(describe(exc))
            return
        try:
            self._run_locked(lock, checked, report)
        finally:
            # Closed only after the database: the next writer may take it at once.
            os.close(lock)
        self._notify(self._stopped.set)

    def _run_locked(
        self, lock: int, checked: FileId, report: Callable[[str | Entry | None], None]
    ) -> None:
        try:
            if not try_lock(lock):
                report(LOCKED)
                return
            # SQLite opens it by name: checked again once it has.
            conn = open_checked(self.path, checked, lambda: connect(
                self.path, fsync=self.fsync, timeout=self.busy_timeout))
        except (sqlite3.Error, OSError) as exc:
            report(describe(exc))
            return
        try:
            try:
                last = last_entry(conn)
            except ValueError as exc:
                report(f"its last entry is malformed ({exc}); run `python -m ledger verify`")
                return
            except sqlite3.Error as exc:
                report(describe(exc))
                return
            if last is not None and entry_hash(last) != last.hash:
                report(
                    f"its last entry (seq {last.seq}) does not match its hash;"
                    f" run `python -m ledger verify {self.path}`"
                )
                return
            if last is not None:
                self._committed = (last.seq, last.hash)
                self._chain = Chain(last.seq, last.hash)
            report(last)
            self._serve(conn)
        finally:
            conn.close()

    def _serve(self, conn: sqlite3.Connection) -> None:
        while True:
            with self._lock:
                while self._pending is None and not self._closing:
                    self._wakeup.wait()
                batch, self._pending = self._pending, None
            if batch is None:
                return
            self._commit(conn, batch)
            self._notify(batch.done.set)

    def _commit(self, conn: sqlite3.Connection, batch: _Batch) -> None:
        # Chained here, from the last committed entry: a failed batch leaves no
        # link behind, so the next batch chains as if it had never been.
        chain = self._chain
        link = chain.link
        try:
            entries = batch.entries = [link(record, when)[0] for record, when in batch.records]
            rows = [to_row(entry) for entry in entries]
            k = _crashpoints.before(f"sqlite ledger: {len(rows)} entries") if (
                _crashpoints.ON) else 0
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(INSERT, rows)
            conn.execute("COMMIT")
            if k:
                _crashpoints.after(k)
        except Exception as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            try:
                found = last_entry(conn)
                self._committed = (0, GENESIS) if found is None else (found.seq, found.hash)
            except (sqlite3.Error, ValueError):
                pass
            batch.cause = describe(exc)
            batch.entries = []
            chain.rewind(*self._committed)
            return
        last = entries[-1]
        self._committed = (last.seq, last.hash)
        self._transactions += 1
