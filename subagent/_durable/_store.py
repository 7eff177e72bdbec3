"""SqliteCheckpoints: the last checkpoint of every task of a pool, in an SQLite file.

One row per run (keyed by its run id, which a resumed run keeps): its spec name, the
run id of the run that delegated it and the id of that call, its status
(``running``, ``paused`` or ``ended``), how many checkpoints it took, the ids of the
calls in flight, and its state as ``RunState`` JSON. ``turn`` and ``call``
checkpoints of ``agentcore`` replace the row; the end of a run marks it.

One writer thread, owned by the object and stopped by :meth:`aclose`, does every
write; checkpoints that arrive while it commits share its next transaction (group
commit, as ``ledger.SqliteSink`` does); with ``ledger._crashpoints`` on, each write
has a transaction of its own, so that a tree's crash points do not depend on its
tasks' timing, or (``GROUPED``) a transaction holds every write made until the
process's tasks are all blocked, so that the grouped path has fixed points too. A
checkpoint that returned is committed: it survives the process being killed. The
file (and SQLite's ``-wal`` and ``-shm``) is created 0600; the writer holds
``<path>-lock`` so a second writer, here or in another process, is refused.

Reading it back (:meth:`SqliteCheckpoints.rows`, ``scan``, ``recovering``; see
``subagent._durable._rows``) treats the file as hostile: a cap
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
from ledger import _crashpoints
from ledger._files import create_regular, lock_path, open_checked, open_private, try_lock
from ledger._oserror import describe

from ._rows import MAX_CHECKPOINT_BYTES as MAX_CHECKPOINT_BYTES
from ._rows import MAX_CHECKPOINT_ROWS as MAX_CHECKPOINT_ROWS
from ._rows import CheckpointError as CheckpointError
from ._rows import CheckpointRow as CheckpointRow
from ._rows import UnreadRow as UnreadRow
from ._rows import check_schema, read_rows, read_run_ids
from ._schema import SCHEMA
from ._writes import Answers, Batch, Claim, Write, commit_batch, connect

#: The most resumes a ``SqliteCheckpoints`` file remembers (``max_claims``): 100,000.
MAX_RESUME_CLAIMS = 100_000

_LOCKED = "another SqliteCheckpoints is writing to it (here or in another process)"


def _to_path(path: str | os.PathLike[str]) -> str:
    return os.fspath(path)


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
      max_claims: The most resumes the file remembers (:meth:`claim`; the oldest
        records are dropped, except those of runs whose row is ``running``).
    """

    path: str = attrs.field(converter=_to_path)
    fsync: bool = attrs.field(default=False, kw_only=True)
    busy_timeout: float = attrs.field(default=5.0, kw_only=True)
    max_rows: int = attrs.field(default=MAX_CHECKPOINT_ROWS, kw_only=True)
    max_state_bytes: int = attrs.field(default=MAX_CHECKPOINT_BYTES, kw_only=True)
    max_claims: int = attrs.field(default=MAX_RESUME_CLAIMS, kw_only=True)
    _open_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _thread: threading.Thread | None = attrs.field(default=None, init=False)
    _token: trio.lowlevel.TrioToken | None = attrs.field(default=None, init=False)
    _stopped: trio.Event = attrs.field(factory=trio.Event, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _wakeup: threading.Condition = attrs.field(init=False)
    _pending: Batch | None = attrs.field(default=None, init=False)
    _one_by_one: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _held: bool = attrs.field(default=False, init=False)
    _released: Batch | None = attrs.field(default=None, init=False)
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
        row: Write = (state.run_id, name, parent, call_id, status,
                       msgspec.json.encode(list(point.in_flight)).decode(), body)
        await self._commit(row, None)
        self.commits += 1

    async def write_kept(
        self, name: str, parent: str | None, call_id: str | None, state: agentcore.RunState
    ) -> None:
        """Commit the result of a background child whose run ended, kept for its
        parent's run (``state``: its ended ``RunState`` marked ``background``, holding
        the message that delivers the result), as its run's row: ``ended``, its state
        a new state of its run that holds ``state`` as its one child (a
        stored state's top is never marked), so that ``recover`` hands the result to
        the parent if the process dies before the parent's own checkpoints hold it.
        A checkpoint.

        Raises:
          CheckpointError: the database cannot be opened or written.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        holder = agentcore.RunState.begin([], run_id=state.run_id, agent=state.agent,
                                          path=state.path, input=state.input)
        holder.children = [state]
        row: Write = (state.run_id, name, parent, call_id, "ended", "[]", holder.to_json())
        await self._commit(row, None)
        self.commits += 1

    async def claim(self, name: str, state: agentcore.RunState, key: str) -> bool:
        """Record that the paused ``state`` is being resumed (by its run id and
        ``key``, see ``subagent._durable._claims``) and, in the same transaction, store it as
        its run's checkpoint (``running``, nothing in flight: answered, not yet
        resumed), and each paused subagent it nests (waited for or background, at any
        depth) in that subagent's own ``paused`` row (the resumed root's next
        checkpoint nests no child), so a crash from here on is recovered with its answers. Returns
        ``False``, writing nothing, when that state was resumed already. The file
        keeps the newest ``max_claims`` records (and those of runs whose row is
        ``running``): a state whose record was dropped can be resumed again. A
        checkpoint.

        Raises:
          CheckpointError: the database cannot be opened or written.
        """
        return await self.take_claim(name, state, key) is not None

    async def take_claim(
        self, name: str, state: agentcore.RunState, key: str
    ) -> Claim | None:
        """:meth:`claim`, returning the claim taken (to give to :meth:`unclaim`) or
        ``None``. A checkpoint.

        Raises:
          CheckpointError: the database cannot be opened or written.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        row: Write = (state.run_id, name, None, None, "running", "[]", state.to_json())
        claim = Claim(state.run_id, key, row, nested=_nested_paused(state))
        await self._commit(None, claim)
        if not claim.taken:
            return None
        self.commits += 1
        return claim

    async def unclaim(self, claim: Claim) -> None:
        """Undo ``claim`` (taken by :meth:`take_claim`, its resume not queued): its
        record is deleted and its run's row put back as it was before (deleted if it
        had none), in one transaction. A checkpoint.

        Raises:
          CheckpointError: the database cannot be written.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        await self._commit(None, claim, release=True)
        self.commits += 1

    async def commit_answers(self, state: agentcore.RunState, key: str) -> bool:
        """Store the paused ``state``, a tree's root with some of its calls answered
        (``RunState.approve`` / ``deny``), as its run's checkpoint (``paused``, the
        row's links kept), in one transaction with the check that its resume was not
        claimed (its run id and ``key``, see :meth:`claim`): ``recover`` after a
        restart or a crash lists the tree with these answers, only its unanswered
        calls waiting. Returns ``False``, writing nothing, when that state was resumed
        already. A checkpoint.

        Raises:
          CheckpointError: the database cannot be written, or it holds no row of that
            run (or only an ended one).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        answers = Answers(state.run_id, key, state.to_json())
        await self._commit(None, None, answers=answers)
        if answers.outcome == "missing":
            raise CheckpointError(
                f"cannot store the answers of run {state.run_id[:200]!r}: the checkpoints "
                "hold no paused or running row of it")
        if answers.outcome != "stored":
            return False
        self.commits += 1
        return True

    async def _commit(
        self, row: Write | None, claim: Claim | None, *, release: bool = False,
        answers: Answers | None = None,
    ) -> None:
        # Hand ``row``, ``claim`` (to take, or to release) or ``answers`` to the writer
        # thread and wait for its commit.
        if _crashpoints.ON and not _crashpoints.GROUPED:
            # One write a transaction (the harness's points fixed).
            async with self._one_by_one:
                await self._commit_now(row, claim, release, answers)
        else:
            await self._commit_now(row, claim, release, answers)

    async def _commit_now(self, row: Write | None, claim: Claim | None, release: bool,
                          answers: Answers | None = None) -> None:
        if self._thread is None:
            await self._open()
        if self._closed:
            raise CheckpointError("write on closed SqliteCheckpoints")
        first = False
        with self._lock:
            batch = self._pending
            if batch is None:
                batch = self._pending = Batch()
                first = True
                if _crashpoints.GROUPED:
                    self._held = True  # released below, once every task is blocked
                else:
                    self._wakeup.notify()
            if row is not None:
                batch.rows.append(row)
            if claim is not None:
                (batch.releases if release else batch.claims).append(claim)
            if answers is not None:
                batch.answers.append(answers)
        with trio.CancelScope(shield=True):
            if first and _crashpoints.GROUPED:
                await self._release_when_blocked(batch)
            # Once handed over it is committed or not; wait to know which.
            await batch.done.wait()
        cause = batch.cause or (batch.refused.get(id(row)) if batch.refused else None)
        if cause is not None:
            raise CheckpointError(f"cannot store a checkpoint: {cause}")

    async def _release_when_blocked(self, batch: Batch) -> None:
        # The crash harness's grouped path: once the batch before is committed (its
        # writers go on), the writes every runnable task makes join the held batch,
        # then the writer thread takes it. Test-only (hence the import here),
        # shielded by the caller: a batch is never left held.
        import trio.testing

        if self._released is not None:
            await self._released.done.wait()
        await trio.testing.wait_all_tasks_blocked()
        with self._lock:
            self._released = batch
            self._held = False
            self._wakeup.notify()

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
            checked = create_regular(self.path)  # 0600 (SQLite's -wal and -shm follow); regular
            lock = open_private(lock_path(self.path), os.O_RDWR)
        except OSError as exc:
            report(describe(exc))
            return
        try:
            if not try_lock(lock):
                report(_LOCKED)
                return
            try:
                # SQLite opens it by name: checked again once it has.
                conn = open_checked(self.path, checked,
                                    lambda: connect(self.path, self.busy_timeout))
                conn.execute(f"PRAGMA synchronous={'FULL' if self.fsync else 'NORMAL'}")
                k = _crashpoints.before("checkpoints: schema") if _crashpoints.ON else 0
                conn.executescript(SCHEMA)
                if k:
                    _crashpoints.after(k)
                check_schema(conn)
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
                while (self._pending is None or self._held) and not self._closing:
                    self._wakeup.wait()
                batch, self._pending = self._pending, None
            if batch is None:
                return
            commit_batch(conn, batch, self.max_claims)
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
        found = await trio.to_thread.run_sync(self._read, False)
        return [row for row in found if isinstance(row, CheckpointRow)]  # all, unscanned

    async def run_ids(self) -> list[str]:
        """The run ids of the file's rows (at most ``max_rows``; none if the file does
        not exist yet), without their states, in a worker thread. A checkpoint.

        Raises:
          CheckpointError: the file cannot be opened or read as an SQLite database.
        """
        return await trio.to_thread.run_sync(
            read_run_ids, self.path, self.busy_timeout, self.max_rows)

    async def scan(self) -> list[CheckpointRow | UnreadRow]:
        """Every run's last checkpoint as :meth:`rows` reads it, except that a row that
        cannot be read (malformed, too large, its state refused) is an
        :class:`UnreadRow` in its place. In a worker thread; a checkpoint.

        Raises:
          CheckpointError: the file is missing or not a checkpoint database, has more
            than ``max_rows`` rows, or a row whose run id cannot be read.
        """
        return await trio.to_thread.run_sync(self._read, True)

    async def recovering(self) -> list[CheckpointRow | UnreadRow]:
        """What ``Pool.recover`` reads: takes the file's writer lock first (it opens
        the writer thread, which holds ``<path>-lock`` until :meth:`aclose`), then
        :meth:`scan`. A second recovery of the same file, here or in another process,
        is refused before it reads a row: the runs a crash left are recovered once.
        A checkpoint.

        Raises:
          CheckpointError: this object is closed, the lock is held (another
            ``SqliteCheckpoints`` writes or recovers the file), the file cannot be
            opened, or as :meth:`scan`.
        """
        if self._thread is None:
            await self._open()
        if self._thread is None:
            raise CheckpointError("recovering from a closed SqliteCheckpoints")
        return await self.scan()

    def _read(self, scan: bool) -> list[CheckpointRow | UnreadRow]:
        return read_rows(self.path, self.busy_timeout, self.max_rows, self.max_state_bytes,
                         scan=scan)



def _nested_paused(state: agentcore.RunState) -> list[tuple[str, str]]:
    # The paused subagents ``state`` nests, waited for or background, at any depth,
    # each as (run id, its state's JSON): their own rows get their answers with the
    # claim (see ``Claim.nested``).
    found = []
    stack = list(state.children)
    while stack:
        node = stack.pop()
        if node.paused:
            found.append((node.run_id, _own_row_state(node)))
        stack.extend(node.children)
    return found


def _own_row_state(node: agentcore.RunState) -> str:
    # ``node``'s JSON as its own row holds it: unmarked (a stored state's top never
    # is; recovery marks a background child's again as it nests it).
    mark, node.background = node.background, None
    try:
        return node.to_json()
    finally:
        node.background = mark
