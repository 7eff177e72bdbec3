"""The peer fault matrix's local stores (``matrix.GRIDS["jsonl_sink"]``,
``["sqlite_sink"]`` and ``["checkpoints"]``): a real file under the pool, broken from
outside. A store is not a process, so its faults are the file's: ``garbage`` is the
file replaced by other bytes (before the pool opens it, or while it writes it),
``oversized`` the disk filling up (a small tmpfs, :mod:`.smalldisk`: ``ENOSPC`` from the
kernel; room again after the victim's run), ``closes_early`` the file truncated,
``hangs`` the database locked by another connection, ``comes_back`` that lock released
within ``busy_timeout``. Real time (the stores write in worker threads), bounded by
``DEADLINE``; the limit made small is ``busy_timeout`` 0.5 s.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import ledger
from agentcore import Message
from agentcore.testing import ScriptedModel
from subagent import Event, Spec, SqliteCheckpoints, Stream, TaskError, open_pool

from .cellkit import bystander_finishes, check_ledger, check_levels, register_bystander
from .matrix import cells
from .smalldisk import fill, free, small_disk

#: Real seconds that bound a cell; a cell that reaches it has hung.
DEADLINE = 30.0
BUSY = 0.5
#: The small disk of the oversized cells: room for the stores and a few runs' entries.
DISK = 1024 * 1024


@attrs.define
class Seen:
    """What a cell saw: each victim run's end, the events' errors, the store after."""

    ends: list[str] = attrs.Factory(list)
    errors: list[str] = attrs.Factory(list)
    after: Any = None
    acknowledged: int = 0
    """The last entry the pool's sink acknowledged (its ``last_seq``)."""
    audited: list[str] = attrs.Factory(list)
    """The errors of the ``task_finished`` entries of the memory ledger."""


def lock(path: Path) -> sqlite3.Connection:
    """Another connection holding the database's write lock."""
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    other.execute("BEGIN EXCLUSIVE")
    return other


def make_store(peer: str, path: Path) -> Any:
    if peer == "jsonl_sink":
        return ledger.JsonlSink(path)
    if peer == "sqlite_sink":
        return ledger.SqliteSink(path, busy_timeout=BUSY)
    return SqliteCheckpoints(path, busy_timeout=BUSY)


def damage(path: Path, fault: str) -> None:
    if fault == "oversized":
        fill(path.parent)
    elif fault == "garbage":
        new = path.with_name("new")
        new.write_bytes(b"this is not a ledger\n" * 100)
        os.replace(new, path)
    elif fault == "closes_early":
        os.truncate(path, 100)


async def play(peer: str, fault: str, moment: str, tmp_path: Path, folder: Path) -> Seen:
    seen = Seen()
    path = folder / ("ledger.jsonl" if peer == "jsonl_sink" else "store.db")
    others: list[sqlite3.Connection] = []
    if moment == "starting":
        # A store written before, then damaged or locked while nothing had it open.
        await one_run(make_store(peer, path), "before", seen)
        if fault == "hangs":
            others.append(lock(path))
        else:
            damage(path, fault)
    store = make_store(peer, path)
    stream = Stream(100_000)
    memory = ledger.MemorySink()
    checkpoints = store if peer == "checkpoints" else None
    with trio.fail_after(DEADLINE):
        async with (
            trio.open_nursery() as helpers,
            open_pool(events=stream, checkpoints=checkpoints) as pool,
        ):
            audit = memory if peer == "checkpoints" else store
            for name in ("first", "victim", "after"):
                pool.register(Spec(name, model=ScriptedModel([Message("assistant", name)]),
                                   audit=audit))
            register_bystander(pool, memory)
            if moment != "starting":
                await end_of(pool, "first", seen)
                if fault == "hangs" or fault == "comes_back":
                    others.append(lock(path))
                    if fault == "comes_back":
                        helpers.start_soon(release, others[-1])
                else:
                    damage(path, fault)
            await end_of(pool, "victim", seen)
            if peer != "checkpoints":
                await bystander_finishes(pool)
            if fault == "oversized":
                # Room again: the same store takes the next run's entries.
                free(folder)
                await end_of(pool, "after", seen)
            elif peer == "checkpoints" and fault == "hangs":
                # Every run of the pool checkpoints to the store: once the lock is
                # gone, the next one goes on.
                others.pop().close()
                await end_of(pool, "after", seen)
            if moment == "close":
                # Closing while the store is locked: bounded by busy_timeout.
                pool.close()
        for other in others:
            other.close()
        await store.aclose()
    if peer != "checkpoints":
        check_ledger(memory)
        seen.acknowledged = store.statistics().last_seq
    seen.audited = [e.error for e in memory.entries if e.kind == "task_finished" and e.error]
    stream.close()
    events: list[Event] = [e async for e in stream]
    seen.errors = [e.error for e in events if e.error and e.kind == "task_finished"]
    if peer != "checkpoints" and path.is_file():
        try:
            report = ledger.verify(path)
        except ledger.VerifyError as exc:
            seen.after = str(exc).replace(str(tmp_path), "TMP")
        else:
            seen.after = (report.ok, report.entries, report.problem)
    return seen


async def release(other: sqlite3.Connection) -> None:
    # Well within busy_timeout: the waiting write goes through.
    await trio.sleep(BUSY / 5)
    other.close()


async def end_of(pool: Any, name: str, seen: Seen) -> None:
    try:
        seen.ends.append((await (await pool.submit(name, "go")).wait()).output)
    except TaskError as exc:
        seen.ends.append(f"{type(exc).__name__}: {exc}")


async def one_run(store: Any, name: str, seen: Seen) -> None:
    checkpoints = store if isinstance(store, SqliteCheckpoints) else None
    audit = None if checkpoints else store
    async with open_pool(checkpoints=checkpoints) as pool:
        pool.register(Spec(name, model=ScriptedModel([Message("assistant", name)]),
                           audit=audit))
        await end_of(pool, name, seen)
    await store.aclose()


def audit_failed(task: str, why: str) -> str:
    return (f"TaskFailed: task {task} failed: AuditError: the audit sink failed to record "
            f"'task_queued': SinkError: cannot record to ledger {why}")


#: ``after`` of a cell whose file must hold exactly the entries its sink acknowledged,
#: chained and whole (how many fit before the disk was full varies with their sizes).
ACKNOWLEDGED = "every acknowledged entry"
FULL = "[Errno 28] No space left on device"

#: (peer, fault, moment): each run's end in order ("before": a run of an earlier pool;
#: "first", "victim", "after": this pool's, or their errors), and ``ledger.verify``'s
#: (ok, entries, problem) of the file afterwards (or its error).
EXPECTED: dict[tuple[str, str, str], tuple[list[str], object]] = {
    ("jsonl_sink", "garbage", "starting"): (["before", audit_failed(
        "victim/0001", "ledger.jsonl: its last entry is malformed (not valid JSON); run "
        "`python -m ledger verify ledger.jsonl`")], (False, 100, "malformed")),
    # Replaced under the sink (renamed over): it fails closed rather than write what
    # would be lost with the old file when it closes.
    ("jsonl_sink", "garbage", "mid_call"): (["first", audit_failed(
        "victim/0002", "ledger.jsonl: the file was removed or replaced since the sink "
        "opened it")], (False, 100, "malformed")),
    ("jsonl_sink", "closes_early", "starting"): (["before", audit_failed(
        "victim/0001", "ledger.jsonl: it ends with a torn line (100 bytes after the last "
        "newline); run `python -m ledger repair ledger.jsonl` first")],
        (False, 0, "torn last line")),
    # Truncated under the sink: it fails closed rather than chain new entries to
    # entries no longer there; verify names the cut.
    ("jsonl_sink", "closes_early", "mid_call"): (["first", audit_failed(
        "victim/0002", "ledger.jsonl: the file was truncated since the sink opened it "
        "(100 bytes, N written)")], (False, 0, "torn last line")),
    # The disk fills up: before the pool opens the store, or after a run; then it has
    # room again and the same store takes the "after" run. A JSON Lines entry that
    # fits in its file's last block is written, a write cut short is undone; which
    # entry is the first that does not fit varies with their sizes (compared as
    # 'task_queued').
    ("jsonl_sink", "oversized", "starting"): (["before", audit_failed(
        "victim/0001", f"ledger.jsonl: {FULL}"), "after"], ACKNOWLEDGED),
    ("jsonl_sink", "oversized", "mid_call"): (["first", audit_failed(
        "victim/0002", f"ledger.jsonl: {FULL}"), "after"], ACKNOWLEDGED),
    # SQLite opens with a WAL index (-shm) it must create and grow: at open its extended
    # code says so; a full disk under an open database is "database or disk is full".
    ("sqlite_sink", "oversized", "starting"): (["before", audit_failed(
        "victim/0001", "store.db: disk I/O error (SQLITE_IOERR_SHMSIZE)"), "after"],
        (True, 12, "")),
    ("sqlite_sink", "oversized", "mid_call"): (["first", audit_failed(
        "victim/0002", "store.db: database or disk is full"), "after"], (True, 12, "")),
    ("checkpoints", "oversized", "starting"): (["before", (
        "TaskFailed: task victim/0001 failed: CheckpointError: cannot open the checkpoint "
        "database: disk I/O error (SQLITE_IOERR_SHMSIZE)"), "after"], None),
    ("checkpoints", "oversized", "mid_call"): (["first", (
        "TaskFailed: task victim/0002 failed: CheckpointError: cannot store a checkpoint: "
        "database or disk is full"), "after"], None),
    ("sqlite_sink", "hangs", "starting"): (
        ["before", audit_failed("victim/0001", "store.db: database is locked")], (True, 6, "")),
    ("sqlite_sink", "hangs", "mid_call"): (
        ["first", audit_failed("victim/0002", "store.db: database is locked")], (True, 6, "")),
    ("sqlite_sink", "hangs", "close"): (
        ["first", audit_failed("victim/0002", "store.db: database is locked")], (True, 6, "")),
    ("sqlite_sink", "garbage", "starting"): (
        ["before", audit_failed("victim/0001", "store.db: file is not a database")],
        (False, 100, "malformed")),
    ("sqlite_sink", "closes_early", "starting"): (
        ["before", audit_failed("victim/0001", "store.db: database disk image is malformed")],
        "cannot read ledger TMP/store.db: database disk image is malformed"),
    # Truncated under the writer: WAL mode keeps the committed transactions.
    ("sqlite_sink", "closes_early", "mid_call"): (["first", "victim"], (True, 12, "")),
    ("sqlite_sink", "comes_back", "mid_call"): (["first", "victim"], (True, 12, "")),
    # (A pool numbers its tasks past the runs of a checkpoint file it can read: a
    # locked one can be, so victim is 0002, after the "before" run's before/0001.)
    ("checkpoints", "hangs", "starting"): (["before", (
        "TaskFailed: task victim/0002 failed: CheckpointError: cannot store a checkpoint: "
        "database is locked"), "after"], None),
    ("checkpoints", "hangs", "mid_call"): (["first", (
        "TaskFailed: task victim/0002 failed: CheckpointError: cannot store a checkpoint: "
        "database is locked"), "after"], None),
    ("checkpoints", "garbage", "starting"): (["before", (
        "TaskFailed: task victim/0001 failed: CheckpointError: cannot open the checkpoint "
        "database: file is not a database")], None),
    ("checkpoints", "closes_early", "starting"): (["before", (
        "TaskFailed: task victim/0001 failed: CheckpointError: cannot open the checkpoint "
        "database: database disk image is malformed")], None),
    ("checkpoints", "closes_early", "mid_call"): (["first", "victim"], None),
    ("checkpoints", "comes_back", "mid_call"): (["first", "victim"], None),
}


@pytest.mark.parametrize(("peer", "fault", "moment"),
                         cells("jsonl_sink", "sqlite_sink", "checkpoints"))
def test_store_cell(peer: str, fault: str, moment: str, tmp_path: Path) -> None:
    seen: list[Seen] = []

    def run(folder: Path) -> None:
        seen.append(trio.run(play, peer, fault, moment, tmp_path, folder))

    if fault == "oversized":
        with small_disk(tmp_path / "disk", DISK) as disk:
            check_levels(lambda: run(disk), peer)
    else:
        check_levels(lambda: run(tmp_path), peer)
    ends, after = EXPECTED[peer, fault, moment]
    # How many bytes the runs wrote varies with their times and durations.
    found = [re.sub(r"\d+ written", "N written", end) for end in seen[0].ends]
    if after == ACKNOWLEDGED:
        found = [re.sub(r"failed to record '\w+'", "failed to record 'task_queued'", end)
                 for end in found]
        after = (True, seen[0].acknowledged, "")
    assert found == ends
    assert seen[0].after == after
    if isinstance(after, tuple) and after[0]:
        # A sound ledger holds what its sink acknowledged: nothing lost, nothing more.
        assert after[1] == seen[0].acknowledged
    if peer == "checkpoints":
        # The runs audit to a memory ledger: it says what their events say.
        assert seen[0].audited == seen[0].errors
    # The event of each failed run says what the task's error says.
    assert seen[0].errors == [end.split(" failed: ", 1)[1] for end in seen[0].ends
                              if end.startswith("TaskFailed")]
