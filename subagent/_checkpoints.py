"""SqliteCheckpoints: the last checkpoint of every task of a pool, in an SQLite file.

One row per run (keyed by its run id, which a resumed run keeps): its spec name, the
run id of the run that delegated it and the id of that call, its status
(``running``, ``paused`` or ``ended``), how many checkpoints it took, the ids of the
calls in flight, and its state as ``RunState`` JSON. ``turn`` and ``call``
checkpoints of ``agentcore`` replace the row; the end of a run marks it.

One writer thread, owned by the object and stopped by :meth:`aclose`, does every
write; checkpoints that arrive while it commits share its next transaction (group
commit, as ``ledger.SqliteSink`` does). A checkpoint that returned is committed: it
survives the process being killed. The file (and SQLite's ``-wal`` and ``-shm``)
is created 0600; the writer holds ``<path>-lock`` so a second writer, here or in
another process, is refused.

Reading it back (:meth:`SqliteCheckpoints.rows`) treats the file as hostile: a cap
on rows and on each state's bytes, column types checked, and each state read by
``RunState.from_json`` (size cap, depth bound, digest, version).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable

import attrs
import msgspec
import trio

import agentcore
from ledger._files import create_private, lock_path, open_private, try_lock
from ledger._oserror import describe

from ._checkschema import CLAIM, SCHEMA, STATUSES, UPSERT, schema_ok
from ._errors import SubagentError

#: The most rows :meth:`SqliteCheckpoints.rows` reads (one per run): 100,000.
MAX_CHECKPOINT_ROWS = 100_000
#: The most bytes of one run's state it reads: ``agentcore.MAX_STATE_BYTES`` (64 MiB).
MAX_CHECKPOINT_BYTES = agentcore.MAX_STATE_BYTES
#: The most bytes of a row's text columns other than the state.
_MAX_FIELD = 4096

_ids = msgspec.json.Decoder(list[str])
_LOCKED = "another SqliteCheckpoints is writing to it (here or in another process)"


class CheckpointError(SubagentError):
    """The checkpoint file cannot be opened, written or read back (the message says
    what was wrong, never the host path)."""


@attrs.frozen
class CheckpointRow:
    """One run's last checkpoint, as read back (see :meth:`SqliteCheckpoints.rows`).

    Attributes:
      run_id: The run's id.
      name: The spec it ran (the pool re-binds it by this name).
      parent: The run id of the run that delegated it; ``None`` for a root task.
      call_id: The id of the delegating call; ``None`` for a root task.
      status: ``running`` (it did not end: it crashed), ``paused`` or ``ended``.
      seq: How many checkpoints it took (``<run_id>@<seq>`` names the last).
      in_flight: The ids of the calls in flight at that checkpoint.
      state: Its state (``None`` for an ended run).
      claimed: Whether a resume of its run was claimed (:meth:`SqliteCheckpoints.claim`
        left a marker in the file): a ``running`` row of such a run may hold the
        answered state it resumes. Read for ``running`` rows only.
    """

    run_id: str
    name: str
    parent: str | None
    call_id: str | None
    status: str
    seq: int
    in_flight: tuple[str, ...]
    state: agentcore.RunState | None
    claimed: bool = False

    @property
    def checkpoint(self) -> str:
        """The name of this checkpoint, as the ``run_resumed`` audit entry gives it."""
        return f"{self.run_id}@{self.seq}"


# A row to write: run_id, name, parent, call_id, status, in_flight, and the state
# (JSON text, or a snapshot the writer thread encodes).
_Write = tuple[str, str, str | None, str | None, str, str, "str | agentcore.RunState"]


def _to_path(path: str | os.PathLike[str]) -> str:
    return os.fspath(path)


@attrs.define(eq=False)
class _Claim:
    # A resume's marker (run id, key) and its run's row, written only if it is new.
    run_id: str
    key: str
    row: _Write
    taken: bool = False


@attrs.define(eq=False)
class _Batch:
    rows: list[_Write] = attrs.Factory(list)
    claims: list[_Claim] = attrs.Factory(list)
    done: trio.Event = attrs.Factory(trio.Event)
    cause: str | None = None
    # Rows (by id) whose state could not be encoded: only their own writes fail.
    refused: dict[int, str] = attrs.Factory(dict)


@attrs.define(eq=False)
class SqliteCheckpoints:
    """The checkpoints of a pool's tasks in an SQLite database (stdlib ``sqlite3``, WAL).

    Give it to :func:`subagent.open_pool` (``checkpoints=``): each task's state is
    committed at every turn boundary, before each call of a tool that is not
    read-only, and when it pauses or ends; ``Pool.recover`` resumes the tasks a
    crash left unfinished. Opens on the first write (no I/O here); close it with
    :meth:`aclose` (or ``async with``).

    Args:
      path: The database file (created 0600 if missing).
      fsync: ``synchronous=FULL`` (durable against power loss) rather than ``NORMAL``
        (durable against the process being killed).
      busy_timeout: Seconds a write waits for a lock held by a reader.
      max_rows: The most rows :meth:`rows` reads.
      max_state_bytes: The most bytes of one state :meth:`rows` reads.
    """

    path: str = attrs.field(converter=_to_path)
    fsync: bool = attrs.field(default=False, kw_only=True)
    busy_timeout: float = attrs.field(default=5.0, kw_only=True)
    max_rows: int = attrs.field(default=MAX_CHECKPOINT_ROWS, kw_only=True)
    max_state_bytes: int = attrs.field(default=MAX_CHECKPOINT_BYTES, kw_only=True)
    _open_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _thread: threading.Thread | None = attrs.field(default=None, init=False)
    _token: trio.lowlevel.TrioToken | None = attrs.field(default=None, init=False)
    _stopped: trio.Event = attrs.field(factory=trio.Event, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _wakeup: threading.Condition = attrs.field(init=False)
    _pending: _Batch | None = attrs.field(default=None, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    commits: int = attrs.field(default=0, init=False)
    """Checkpoints committed (for statistics and tests)."""

    @_wakeup.default
    def _make_wakeup(self) -> threading.Condition:
        return threading.Condition(self._lock)

    async def __aenter__(self) -> SqliteCheckpoints:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<subagent.SqliteCheckpoints commits={self.commits}>"

    # -- writing -----------------------------------------------------------------------

    async def write(
        self, name: str, parent: str | None, call_id: str | None, point: agentcore.Checkpoint
    ) -> None:
        """Commit ``point`` as the last checkpoint of its run. A checkpoint (trio).

        Raises:
          CheckpointError: the database cannot be opened or written; the run must
            not go on as if it were stored.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        kind = point.kind
        state = point.state
        status = {"start": "running", "turn": "running", "call": "running"}.get(kind, kind.value)
        body: str | agentcore.RunState
        if kind is agentcore.CheckpointKind.paused:
            body = state.to_json()  # the run's own state: encoded before it changes
        elif kind is agentcore.CheckpointKind.ended:
            body = ""
        else:
            body = state  # a snapshot nobody changes: the writer thread encodes it
        row: _Write = (state.run_id, name, parent, call_id, status,
                       msgspec.json.encode(list(point.in_flight)).decode(), body)
        await self._commit(row, None)
        self.commits += 1

    async def claim(self, name: str, state: agentcore.RunState, key: str) -> bool:
        """Record that the paused ``state`` is being resumed (by its run id and
        ``key``, see ``subagent._resumed``) and, in the same transaction, store it as
        its run's checkpoint (``running``, nothing in flight: answered, not yet
        resumed), so a crash from here on is recovered with its answers. Returns ``False``, writing
        nothing, when that state was resumed already. A checkpoint.

        Raises:
          CheckpointError: the database cannot be opened or written.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        row: _Write = (state.run_id, name, None, None, "running", "[]", state.to_json())
        claim = _Claim(state.run_id, key, row)
        await self._commit(None, claim)
        if claim.taken:
            self.commits += 1
        return claim.taken

    async def _commit(self, row: _Write | None, claim: _Claim | None) -> None:
        # Hand ``row`` or ``claim`` to the writer thread and wait for its commit.
        if self._thread is None:
            await self._open()
        if self._closed:
            raise CheckpointError("write on closed SqliteCheckpoints")
        with self._lock:
            batch = self._pending
            if batch is None:
                batch = self._pending = _Batch()
                self._wakeup.notify()
            if row is not None:
                batch.rows.append(row)
            if claim is not None:
                batch.claims.append(claim)
        with trio.CancelScope(shield=True):
            # Once handed over it is committed or not; wait to know which.
            await batch.done.wait()
        cause = batch.cause or (batch.refused.get(id(row)) if batch.refused else None)
        if cause is not None:
            raise CheckpointError(f"cannot store a checkpoint: {cause}")

    async def _open(self) -> None:
        async with self._open_lock:
            if self._thread is not None or self._closed:
                return
            token = trio.lowlevel.current_trio_token()
            opened = trio.Event()
            outcome: list[str | None] = []

            def report(result: str | None) -> None:
                outcome.append(result)
                token.run_sync_soon(opened.set)

            thread = threading.Thread(target=self._run, args=(report,),
                                      name="subagent checkpoints", daemon=True)
            self._token = token
            thread.start()
            with trio.CancelScope(shield=True):
                await opened.wait()
            [result] = outcome
            if result is not None:
                thread.join()
                raise CheckpointError(f"cannot open the checkpoint database: {result}")
            self._thread = thread

    async def aclose(self) -> None:
        """Commit what is pending and stop the writer thread. Idempotent; a checkpoint."""
        if not self._closed:
            self._closed = True
            with trio.CancelScope(shield=True):
                async with self._open_lock:
                    pass
                if self._thread is not None:
                    with self._lock:
                        self._closing = True
                        self._wakeup.notify()
                    await self._stopped.wait()
        await trio.lowlevel.checkpoint()

    def _notify(self, fn: Callable[[], object]) -> None:
        assert self._token is not None
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(fn)

    def _run(self, report: Callable[[str | None], None]) -> None:
        try:
            lock = open_private(lock_path(self.path), os.O_RDWR)
        except OSError as exc:
            report(describe(exc))
            return
        try:
            if not try_lock(lock):
                report(_LOCKED)
                return
            try:
                create_private(self.path)
                conn = _connect(self.path, self.busy_timeout)
                conn.execute(f"PRAGMA synchronous={'FULL' if self.fsync else 'NORMAL'}")
                conn.executescript(SCHEMA)
                _check_schema(conn)
            except CheckpointError as exc:
                report(str(exc))
                return
            except (sqlite3.Error, OSError) as exc:
                report(describe(exc))
                return
            report(None)
            try:
                self._serve(conn)
            finally:
                conn.close()
        finally:
            os.close(lock)
            self._notify(self._stopped.set)

    def _serve(self, conn: sqlite3.Connection) -> None:
        while True:
            with self._lock:
                while self._pending is None and not self._closing:
                    self._wakeup.wait()
                batch, self._pending = self._pending, None
            if batch is None:
                return
            try:
                rows = []
                for row in batch.rows:
                    try:
                        rows.append((*row[:6], row[6] if isinstance(row[6], str)
                                     else row[6].to_json()))
                    except agentcore.RunStateError as exc:  # this row's run fails alone
                        batch.refused[id(row)] = str(exc)[:300]
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(UPSERT, rows)
                taken = []
                for claim in batch.claims:
                    if conn.execute(CLAIM, (claim.run_id, claim.key)).rowcount == 1:
                        conn.execute(UPSERT, claim.row)
                        taken.append(claim)
                conn.execute("COMMIT")
                for claim in taken:
                    claim.taken = True
            except Exception as exc:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                batch.cause = describe(exc) if isinstance(exc, OSError) else str(exc)[:300]
            self._notify(batch.done.set)

    # -- reading -----------------------------------------------------------------------

    async def rows(self) -> list[CheckpointRow]:
        """Every run's last checkpoint, in a worker thread. A checkpoint.

        Raises:
          CheckpointError: the file is missing or not a checkpoint database, has
            more than ``max_rows`` rows, a malformed row, or a state past
            ``max_state_bytes`` or refused by ``RunState.from_json`` (edited,
            damaged, an unknown version); the message names the row's run id.
        """
        return await trio.to_thread.run_sync(self._read)

    def _read(self) -> list[CheckpointRow]:
        if not os.path.isfile(self.path):
            raise CheckpointError("no checkpoint database at the given path")
        try:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout)
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot open the checkpoint database: {exc}") from None
        try:
            tables = {name for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' LIMIT 100")}
            if "checkpoints" not in tables:
                if tables:
                    raise CheckpointError("not a checkpoint database: no checkpoints table")
                return []  # created, then killed before its first checkpoint
            _check_schema(conn)
            found = conn.execute(
                "SELECT run_id, name, parent, call_id, status, seq, in_flight, length(state) "
                "FROM checkpoints ORDER BY rowid LIMIT ?", (self.max_rows + 1,)
            ).fetchall()
            if len(found) > self.max_rows:
                raise CheckpointError(
                    f"the checkpoint database has more than {self.max_rows} rows (max_rows)"
                )
            claims = "resumed" in tables
            return [self._row(conn, values, claims) for values in found]
        except sqlite3.Error as exc:
            raise CheckpointError(f"not a checkpoint database: {exc}") from None
        finally:
            conn.close()

    def _row(
        self, conn: sqlite3.Connection, values: tuple[object, ...], claims: bool
    ) -> CheckpointRow:
        run_id, name, parent, call_id, status, seq, in_flight, size = values
        if not isinstance(run_id, str) or len(run_id) > _MAX_FIELD:
            raise CheckpointError("malformed checkpoint row: bad run id")
        where = f"checkpoint of run {run_id[:200]!r}"
        texts = (name, in_flight)
        if not all(isinstance(t, str) and len(t) <= _MAX_FIELD for t in texts) or not all(
            t is None or (isinstance(t, str) and len(t) <= _MAX_FIELD) for t in (parent, call_id)
        ):
            raise CheckpointError(f"malformed {where}: bad text column")
        if status not in STATUSES or not isinstance(seq, int) or not isinstance(size, int):
            raise CheckpointError(f"malformed {where}: bad status or counter")
        try:
            ids = tuple(_ids.decode(str(in_flight)))
        except msgspec.DecodeError:
            raise CheckpointError(f"malformed {where}: bad in-flight call ids") from None
        state = None
        if status != "ended":
            if size > self.max_state_bytes:
                raise CheckpointError(
                    f"{where} too large (more than {self.max_state_bytes} bytes)"
                )
            (text,) = conn.execute(
                "SELECT state FROM checkpoints WHERE run_id = ?", (run_id,)
            ).fetchone()
            if not isinstance(text, str | bytes):
                raise CheckpointError(f"malformed {where}: its state is not text")
            try:
                state = agentcore.RunState.from_json(text, max_bytes=self.max_state_bytes)
            except agentcore.RunStateError as exc:
                raise CheckpointError(f"{where} refused: {exc}") from None
            if state.run_id != run_id:
                raise CheckpointError(f"malformed {where}: its state is another run's")
        claimed = claims and status == "running" and conn.execute(
            "SELECT 1 FROM resumed WHERE run_id = ? LIMIT 1", (run_id,)
        ).fetchone() is not None
        return CheckpointRow(run_id, str(name), parent, call_id,  # type: ignore[arg-type]
                             str(status), seq, ids, state, claimed)


def _connect(path: str, timeout: float) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    except BaseException:
        conn.close()
        raise
    return conn


def _check_schema(conn: sqlite3.Connection) -> None:
    if not schema_ok(conn):
        raise CheckpointError("not a checkpoint database: its schema is not the one "
                              "SqliteCheckpoints creates (refusing to run its SQL)")
