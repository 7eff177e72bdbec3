"""The writer side of :class:`subagent.SqliteCheckpoints`: what a write hands to its
writer thread (:class:`Batch`) and the one transaction that thread commits for it
(:func:`commit_batch`). Sync code run in that thread; no checkpoints here."""

from __future__ import annotations

import contextlib
import sqlite3

import attrs
import trio

import agentcore
from ledger import _crashpoints
from ledger._oserror import describe

from ._schema import CLAIM, UPSERT

# A row to write: run_id, name, parent, call_id, status, in_flight, and the state
# (JSON text, or a snapshot the writer thread encodes).
Write = tuple[str, str, str | None, str | None, str, str, "str | agentcore.RunState"]


# A run's row as it was before a claim wrote it: name, parent, call_id, status, seq,
# in_flight, state; ``None`` when it had none.
Before = tuple[object, ...] | None


@attrs.define(eq=False)
class Claim:
    """A resume's marker (run id, key) and its run's row, written only if it is new;
    once taken, the row as it was before (what :meth:`SqliteCheckpoints.unclaim`
    puts back)."""

    run_id: str
    key: str
    row: Write
    taken: bool = False
    before: Before = None
    #: The answered states of the paused subagents the claimed tree nests, waited for
    #: or background (run id, state JSON): each written to its own ``paused`` row in
    #: the claim's transaction, so that the answers survive the resumed root's next
    #: checkpoint (which nests no child) until the subagent's own one (issue 32).
    nested: list[tuple[str, str]] = attrs.Factory(list)
    #: Their rows as they were before (run id, row), put back by a release.
    nested_before: list[tuple[str, Before]] = attrs.Factory(list)


@attrs.define(eq=False)
class Answers:
    """A paused tree's state with the answers given so far (JSON), for its root run's
    row, stored only while its resume (run id, key) is not claimed; ``outcome`` says
    how it went: ``stored``, ``claimed`` (resumed already: nothing written) or
    ``missing`` (no row of that run that has not ended: nothing written)."""

    run_id: str
    key: str
    state: str
    outcome: str = ""


@attrs.define(eq=False)
class Batch:
    """The writes that share one transaction, and how it went."""

    rows: list[Write] = attrs.Factory(list)
    claims: list[Claim] = attrs.Factory(list)
    #: Taken claims to undo: marker deleted, row put back as it was.
    releases: list[Claim] = attrs.Factory(list)
    answers: list[Answers] = attrs.Factory(list)
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


_BEFORE = ("SELECT name, parent, call_id, status, seq, in_flight, state FROM checkpoints "
           "WHERE run_id = ?")
_PUT_BACK = ("UPDATE checkpoints SET name = ?, parent = ?, call_id = ?, status = ?, seq = ?, "
             "in_flight = ?, state = ? WHERE run_id = ?")
_CLAIMED = "SELECT 1 FROM resumed WHERE run_id = ? AND key = ?"
# A paused tree's answers: its root's row, links kept, paused with them.
_ANSWERED = ("UPDATE checkpoints SET status = 'paused', seq = seq + 1, in_flight = '[]', "
             "state = ? WHERE run_id = ? AND status != 'ended'")
# A claimed tree's paused subagent: its own row, paused, with its answers.
_NESTED = ("UPDATE checkpoints SET seq = seq + 1, state = ? WHERE run_id = ? "
           "AND status = 'paused'")
# The markers older than the newest ``max_claims`` (the table's rowids grow by one per
# marker), except those of a run whose row is a running claimed resume: recovery reads
# its marker (``CheckpointRow.claimed``).
_PRUNE = ("DELETE FROM resumed WHERE rowid <= (SELECT max(rowid) FROM resumed) - ? AND NOT "
          "EXISTS (SELECT 1 FROM checkpoints c WHERE c.run_id = resumed.run_id "
          "AND c.status = 'running')")


def _label(batch: Batch) -> str:
    # What a crash point's trace says of a batch: each row's run id and status.
    parts = [f"{row[0]} {row[4]}" for row in batch.rows]
    parts += [f"claim {c.run_id}" for c in batch.claims]
    parts += [f"unclaim {c.run_id}" for c in batch.releases]
    parts += [f"answers {a.run_id}" for a in batch.answers]
    return "checkpoints: " + ", ".join(parts)


def commit_batch(conn: sqlite3.Connection, batch: Batch, max_claims: int) -> None:
    """Commit ``batch`` in one transaction (rolled back, with ``batch.cause`` set, if
    it fails): its rows; its claims, each taken only if its marker is new (then the
    ``resumed`` table keeps the newest ``max_claims`` markers, and those of running
    claimed rows); its releases; its answers (each stored unless claimed)."""
    try:
        rows = []
        for row in batch.rows:
            try:
                rows.append((*row[:6], row[6] if isinstance(row[6], str)
                             else row[6].to_json()))
            except agentcore.RunStateError as exc:  # this row's run fails alone
                batch.refused[id(row)] = str(exc)[:300]
        k = _crashpoints.before(_label(batch)) if _crashpoints.ON else 0
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(UPSERT, rows)
        taken = []
        for claim in batch.claims:
            before = conn.execute(_BEFORE, (claim.run_id,)).fetchone()
            if conn.execute(CLAIM, (claim.run_id, claim.key)).rowcount == 1:
                conn.execute(UPSERT, claim.row)
                kids = [(run_id, conn.execute(_BEFORE, (run_id,)).fetchone())
                        for run_id, _ in claim.nested]
                conn.executemany(_NESTED, [(state, run_id) for run_id, state in claim.nested])
                taken.append((claim, before, kids))
        if taken:
            conn.execute(_PRUNE, (max_claims,))
        for claim in batch.releases:
            conn.execute("DELETE FROM resumed WHERE run_id = ? AND key = ?",
                         (claim.run_id, claim.key))
            if claim.before is None:
                conn.execute("DELETE FROM checkpoints WHERE run_id = ?", (claim.run_id,))
            else:
                conn.execute(_PUT_BACK, (*claim.before, claim.run_id))
            for run_id, kid in claim.nested_before:
                if kid is not None:
                    conn.execute(_PUT_BACK, (*kid, run_id))
        outcomes = []
        for answers in batch.answers:
            if conn.execute(_CLAIMED, (answers.run_id, answers.key)).fetchone() is not None:
                outcomes.append("claimed")
            elif conn.execute(_ANSWERED, (answers.state, answers.run_id)).rowcount == 1:
                outcomes.append("stored")
            else:
                outcomes.append("missing")
        conn.execute("COMMIT")
        if k:
            _crashpoints.after(k)
        for claim, before, kids in taken:
            claim.taken = True
            claim.before = before
            claim.nested_before = kids
        for answers, outcome in zip(batch.answers, outcomes, strict=True):
            answers.outcome = outcome
    except Exception as exc:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        batch.cause = describe(exc) if isinstance(exc, OSError) else str(exc)[:300]
