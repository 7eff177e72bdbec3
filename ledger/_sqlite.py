"""SqliteSink: a ledger in an SQLite database, written by one thread with group commit."""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence

import attrs
import trio

from ._chain import Chain
from ._clock import utc_now
from ._encoding import GENESIS, entry_hash
from ._entry import Entry, Record
from ._errors import SinkClosedError, SinkError
from ._files import LOCKED, create_private, lock_path, open_private, try_lock
from ._offload import is_large, redact_in_thread
from ._oserror import describe
from ._query import query
from ._redact import redact_record
from ._sink import SinkStatistics, to_path
from ._sqlite_store import INSERT, connect, last_entry, to_row


@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class _Batch:
    """Entries committed in one transaction, and how that went."""

    epoch: int
    entries: list[Entry] = attrs.Factory(list)
    done: trio.Event = attrs.Factory(trio.Event)
    cause: str | None = None
    """Why the batch was not committed; ``None`` once it was."""
    head: tuple[int, str] = (0, GENESIS)
    """The last committed entry's seq and hash, when the batch failed."""


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
    in its next transaction (group commit). ``record()`` returns once its
    entry is committed. Entries chain exactly as in a JSON Lines ledger.

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
    _epoch: int = attrs.field(default=0, init=False)
    _recorded: int = attrs.field(default=0, init=False)
    # Shared with the writer thread, under _lock.
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _wakeup: threading.Condition = attrs.field(init=False)
    _pending: _Batch | None = attrs.field(default=None, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    # Owned by the writer thread.
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
            if result is not None:
                self._chain = Chain(result.seq, result.hash)

    async def record(self, record: Record) -> Entry:
        """Redact, chain and store ``record``; return its entry once committed.

        A checkpoint. Concurrent records share transactions.

        Raises:
          SinkError: The database cannot be opened or written (disk full,
            permission denied, database locked, ...); the entry was not
            recorded.
          SinkClosedError: The sink was closed.
          ValueError: ``record.kind`` is empty.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        record = await redact_in_thread(record) if is_large(record) else redact_record(record)
        if self._thread is None and not self._closed:
            await self._open()
        if self._closed:
            raise SinkClosedError(f"record() on a closed SqliteSink ({self.path})")
        entry, _ = self._chain.link(record, self.clock())
        with self._lock:
            batch = self._pending
            if batch is None:
                batch = self._pending = _Batch(self._epoch)
                self._wakeup.notify()
            batch.entries.append(entry)
        await batch.done.wait()
        if batch.cause is not None:
            raise SinkError(self.path, batch.cause)
        self._recorded += 1
        return entry

    def _finish(self, batch: _Batch) -> None:
        """Wake a batch's recorders (in the trio thread); undo its links if it failed."""
        if batch.cause is not None and batch.epoch == self._epoch:
            # Entries linked after the failed ones chain onto entries that are
            # not stored: fail them too and continue the chain from the database.
            self._epoch += 1
            self._chain.rewind(*batch.head)
            with self._lock:
                stale, self._pending = self._pending, None
            if stale is not None:
                stale.cause = f"an earlier entry could not be recorded ({batch.cause})"
                stale.done.set()
        batch.done.set()

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
            lock = open_private(lock_path(self.path), os.O_RDWR)
        except OSError as exc:
            report(describe(exc))
            return
        try:
            self._run_locked(lock, report)
        finally:
            # Closed only after the database: the next writer may take it at once.
            os.close(lock)
        self._notify(self._stopped.set)

    def _run_locked(self, lock: int, report: Callable[[str | Entry | None], None]) -> None:
        try:
            if not try_lock(lock):
                report(LOCKED)
                return
            # Created here, 0600, so that SQLite gives its -wal and -shm files the same mode.
            create_private(self.path)
            conn = connect(self.path, fsync=self.fsync, timeout=self.busy_timeout)
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
            self._notify(functools.partial(self._finish, batch))

    def _commit(self, conn: sqlite3.Connection, batch: _Batch) -> None:
        first, last = batch.entries[0], batch.entries[-1]
        if (first.seq - 1, first.prev_hash) != self._committed:
            batch.cause = f"an earlier entry could not be recorded (entry {first.seq - 1})"
            batch.head = self._committed
            return
        try:
            rows = [to_row(entry) for entry in batch.entries]
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(INSERT, rows)
            conn.execute("COMMIT")
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
            batch.head = self._committed
            return
        self._committed = (last.seq, last.hash)
        self._transactions += 1
