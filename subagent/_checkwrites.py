"""The writer side of :class:`subagent.SqliteCheckpoints`: what a write hands to its
writer thread (:class:`Batch`) and the one transaction that thread commits for it
(:func:`commit_batch`). Sync code run in that thread; no checkpoints here."""

from __future__ import annotations

import contextlib
import sqlite3

import attrs
import trio

import agentcore
from ledger._oserror import describe

from ._checkschema import CLAIM, UPSERT

# A row to write: run_id, name, parent, call_id, status, in_flight, and the state
# (JSON text, or a snapshot the writer thread encodes).
Write = tuple[str, str, str | None, str | None, str, str, "str | agentcore.RunState"]


@attrs.define(eq=False)
class Claim:
    """A resume's marker (run id, key) and its run's row, written only if it is new."""

    run_id: str
    key: str
    row: Write
    taken: bool = False


@attrs.define(eq=False)
class Batch:
    """The writes that share one transaction, and how it went."""

    rows: list[Write] = attrs.Factory(list)
    claims: list[Claim] = attrs.Factory(list)
    done: trio.Event = attrs.Factory(trio.Event)
    cause: str | None = None
    #: Rows (by id) whose state could not be encoded: only their own writes fail.
    refused: dict[int, str] = attrs.Factory(dict)


def connect(path: str, timeout: float) -> sqlite3.Connection:
    """The writer thread's connection to ``path``, in WAL mode."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    except BaseException:
        conn.close()
        raise
    return conn


def commit_batch(conn: sqlite3.Connection, batch: Batch) -> None:
    """Commit ``batch`` in one transaction (rolled back, with ``batch.cause`` set, if
    it fails); a claim is taken only if its marker is new."""
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
