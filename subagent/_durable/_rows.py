"""Reading a checkpoint file back: :class:`CheckpointRow`, the rows of
``SqliteCheckpoints.rows`` and ``SqliteCheckpoints.scan``, and :class:`UnreadRow` for a
row that cannot be read.

The file is hostile: a cap on rows and on each state's bytes, column types checked,
its schema exactly the one ``SqliteCheckpoints`` creates, and each state read by
``RunState.from_json`` (size cap, depth bound, digest, version). Sync code, run in a
worker thread; no checkpoints here.
"""

from __future__ import annotations

import os
import sqlite3

import attrs
import msgspec

import agentcore

from .._errors import SubagentError
from ._claims import resume_key
from ._schema import STATUSES, schema_ok

#: The most rows :meth:`SqliteCheckpoints.rows` reads (one per run): 100,000.
MAX_CHECKPOINT_ROWS = 100_000
#: The most bytes of one run's state it reads: ``agentcore.limits.MAX_STATE_BYTES`` (64 MiB).
MAX_CHECKPOINT_BYTES = agentcore.limits.MAX_STATE_BYTES
#: The most bytes of a row's text columns other than the state.
_MAX_FIELD = 4096

_ids = msgspec.json.Decoder(list[str])


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
      state: Its state; for an ended run ``None``, or the result of a background
        child kept for its parent (``SqliteCheckpoints.write_kept``).
      claimed: Whether a resume of its run was claimed (:meth:`SqliteCheckpoints.claim`
        left a marker in the file): a ``running`` row of such a run may hold the
        answered state it resumes. Read for ``running`` rows only.
      claimed_state: Whether its state is the very state whose resume was claimed (a
        marker of its run id and of this state's ``resume_key``, as ``Pool.resume``
        claims it): the claim's own row, whose calls without a result never started.
        Read for claimed rows only.
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
    claimed_state: bool = False

    @property
    def checkpoint(self) -> str:
        """The name of this checkpoint, as the ``run_resumed`` audit entry gives it."""
        return f"{self.run_id}@{self.seq}"


@attrs.frozen
class UnreadRow:
    """A row :meth:`SqliteCheckpoints.scan` could not read (malformed, too large, its
    state refused by ``RunState.from_json``): ``Pool.recover`` reports the tree it
    belongs to in ``Recovered.failed`` and recovers the others.

    Attributes:
      run_id: The row's run id.
      parent: The run id of the run that delegated it, if that column could be read
        (``None``: a root task, or unknown).
      error: What was wrong (names the run id, never the host path).
    """

    run_id: str
    parent: str | None
    error: CheckpointError


def read_run_ids(path: str, busy_timeout: float, max_rows: int) -> list[str]:
    """The run ids of the first ``max_rows`` rows of the checkpoint file at ``path``
    (none if it does not exist, or has no checkpoints table yet); their states are
    not read.

    Raises:
      CheckpointError: the file cannot be opened or read as an SQLite database.
    """
    if not os.path.isfile(path):
        return []
    try:
        conn = sqlite3.connect(path, timeout=busy_timeout)
    except sqlite3.Error as exc:
        raise CheckpointError(f"cannot open the checkpoint database: {exc}") from None
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                        "name = 'checkpoints'").fetchone() is None:
            return []
        found = conn.execute("SELECT run_id FROM checkpoints LIMIT ?", (max_rows,))
        return [run_id for (run_id,) in found if isinstance(run_id, str)]
    except sqlite3.Error as exc:
        raise CheckpointError(f"cannot read the checkpoint database: {exc}") from None
    finally:
        conn.close()


def read_rows(
    path: str, busy_timeout: float, max_rows: int, max_state_bytes: int, *, scan: bool
) -> list[CheckpointRow | UnreadRow]:
    """The rows of the checkpoint file at ``path``, in the order first written. With
    ``scan``, a row that cannot be read is an :class:`UnreadRow`; without, it raises.

    Raises:
      CheckpointError: the file is missing or not a checkpoint database, has more
        than ``max_rows`` rows, or a row whose run id cannot be read; without ``scan``,
        any row that cannot be read.
    """
    if not os.path.isfile(path):
        raise CheckpointError("no checkpoint database at the given path")
    try:
        conn = sqlite3.connect(path, timeout=busy_timeout)
    except sqlite3.Error as exc:
        raise CheckpointError(f"cannot open the checkpoint database: {exc}") from None
    try:
        tables = {name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' LIMIT 100")}
        if "checkpoints" not in tables:
            if tables:
                raise CheckpointError("not a checkpoint database: no checkpoints table")
            return []  # created, then killed before its first checkpoint
        check_schema(conn)
        found = conn.execute(
            "SELECT run_id, name, parent, call_id, status, seq, in_flight, length(state) "
            "FROM checkpoints ORDER BY rowid LIMIT ?", (max_rows + 1,)
        ).fetchall()
        if len(found) > max_rows:
            raise CheckpointError(
                f"the checkpoint database has more than {max_rows} rows (max_rows)"
            )
        claims = "resumed" in tables
        rows: list[CheckpointRow | UnreadRow] = []
        for values in found:
            try:
                rows.append(_row(conn, values, claims, max_state_bytes))
            except CheckpointError as exc:
                run_id, parent = values[0], values[2]
                if not scan or not isinstance(run_id, str) or len(run_id) > _MAX_FIELD:
                    raise
                ok = isinstance(parent, str) and len(parent) <= _MAX_FIELD
                rows.append(UnreadRow(run_id, parent if ok else None, exc))
        return rows
    except sqlite3.Error as exc:
        raise CheckpointError(f"not a checkpoint database: {exc}") from None
    finally:
        conn.close()


def _row(
    conn: sqlite3.Connection, values: tuple[object, ...], claims: bool, max_state_bytes: int
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
    if status != "ended" or size > 0:  # an ended row's state: a kept background result
        if size > max_state_bytes:
            raise CheckpointError(f"{where} too large (more than {max_state_bytes} bytes)")
        (text,) = conn.execute(
            "SELECT state FROM checkpoints WHERE run_id = ?", (run_id,)
        ).fetchone()
        if not isinstance(text, str | bytes):
            raise CheckpointError(f"malformed {where}: its state is not text")
        try:
            state = agentcore.RunState.from_json(text, max_bytes=max_state_bytes)
        except agentcore.RunStateError as exc:
            raise CheckpointError(f"{where} refused: {exc}") from None
        if state.run_id != run_id:
            raise CheckpointError(f"malformed {where}: its state is another run's")
    claimed = claims and status == "running" and conn.execute(
        "SELECT 1 FROM resumed WHERE run_id = ? LIMIT 1", (run_id,)
    ).fetchone() is not None
    own = claimed and state is not None and conn.execute(
        "SELECT 1 FROM resumed WHERE run_id = ? AND key = ?", (run_id, resume_key(state))
    ).fetchone() is not None
    return CheckpointRow(run_id, str(name), parent, call_id,  # type: ignore[arg-type]
                         str(status), seq, ids, state, claimed, own)


def check_schema(conn: sqlite3.Connection) -> None:
    """Raise unless ``conn``'s database holds exactly ``SqliteCheckpoints``' schema.

    Raises:
      CheckpointError: it holds something else (its SQL is not run).
    """
    if not schema_ok(conn):
        raise CheckpointError("not a checkpoint database: its schema is not the one "
                              "SqliteCheckpoints creates (refusing to run its SQL)")
