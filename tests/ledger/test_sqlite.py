from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import ledger._sqlite
from ledger import Record, SinkClosedError, SinkError, SqliteSink, query, tail, verify
from ledger._sqlite_store import connect as real_connect

from ._helpers import Ticking, exists


async def record_many(sink: SqliteSink, tasks: int, each: int) -> list[int]:
    done: list[int] = []

    async def writer(task: int) -> None:
        for n in range(each):
            entry = await sink.record(Record("tool_request", f"run-{task}", call_id=str(n)))
            done.append(entry.seq)

    async with trio.open_nursery() as nursery:
        for task in range(tasks):
            nursery.start_soon(writer, task)
    return done


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "audit.db"


async def test_no_io_until_the_first_record(db: Path) -> None:
    sink = SqliteSink(db)
    assert not exists(db)
    assert repr(sink) == f"<ledger.SqliteSink {str(db)!r} seq=0 unopened>"
    entry = await sink.record(Record("prompt", arguments="hi"))
    assert repr(sink) == f"<ledger.SqliteSink {str(db)!r} seq=1 open>"
    await sink.aclose()
    assert query(db) == [entry]
    assert repr(sink) == f"<ledger.SqliteSink {str(db)!r} seq=1 closed>"


async def test_concurrent_records_share_transactions(db: Path) -> None:
    sink = SqliteSink(db)
    done = await record_many(sink, 100, 50)
    stats = sink.statistics()
    await sink.aclose()
    assert sorted(done) == list(range(1, 5001))
    assert (stats.recorded, stats.last_seq) == (5000, 5000)
    assert stats.transactions <= 5000 // 10  # group commit
    report = verify(db)
    assert (report.ok, report.format, report.entries) == (True, "sqlite", 5000)


async def test_reopening_continues_the_chain(db: Path) -> None:
    first = SqliteSink(db)
    await record_many(first, 1, 3)
    await first.aclose()
    second = SqliteSink(db)
    assert (await second.record(Record("run_end"))).seq == 4
    await second.aclose()
    assert verify(db).entries == 4
    assert verify(db).ok


async def test_locked_database_raises_and_loses_nothing(db: Path) -> None:
    sink = SqliteSink(db, busy_timeout=0.01)
    kept = [await sink.record(Record("prompt"))]
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    failures: list[str] = []

    async def doomed() -> None:
        with pytest.raises(SinkError) as info:
            await sink.record(Record("tool_request"))
        failures.append(info.value.cause)

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(doomed)
    assert failures[0] == "database is locked"
    assert set(failures) <= {
        "database is locked",
        "an earlier entry could not be recorded (database is locked)",
        "an earlier entry could not be recorded (entry 2)",
    }
    blocker.execute("ROLLBACK")
    blocker.close()
    kept.append(await sink.record(Record("run_end")))
    await sink.aclose()
    assert [e.seq for e in kept] == [1, 2]
    assert query(db) == kept
    assert verify(db).ok


async def test_locked_database_message(db: Path) -> None:
    sink = SqliteSink(db, busy_timeout=0.01)
    await sink.record(Record("prompt"))
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(SinkError) as info:
            await sink.record(Record("prompt"))
    finally:
        blocker.close()
    assert str(info.value) == f"cannot record to ledger {db}: database is locked"
    await sink.aclose()


async def test_full_database_raises_and_loses_nothing(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def small_connect(path: str, *, fsync: bool, timeout: float) -> sqlite3.Connection:
        conn = real_connect(path, fsync=fsync, timeout=timeout)
        conn.execute("PRAGMA max_page_count = 12")
        return conn

    monkeypatch.setattr(ledger._sqlite, "connect", small_connect)
    sink = SqliteSink(db)
    kept = []
    with pytest.raises(SinkError) as info:
        for n in range(10_000):
            kept.append(await sink.record(Record("tool_result", result="x" * 200, call_id=str(n))))
    assert str(info.value) == f"cannot record to ledger {db}: database or disk is full"
    await sink.aclose()
    assert len(kept) > 5
    assert query(db) == kept
    assert verify(db).ok


async def test_unopenable_path_raises_a_sink_error(tmp_path: Path) -> None:
    path = tmp_path / "missing-dir" / "audit.db"
    sink = SqliteSink(path)
    with pytest.raises(SinkError) as info:
        await sink.record(Record("prompt"))
    # The writer's lock file beside the database is the first thing it cannot create.
    assert str(info.value) == f"cannot record to ledger {path}: [Errno 2] No such file or directory"
    await sink.aclose()


async def test_closed_sink_refuses_records(db: Path) -> None:
    sink = SqliteSink(db)
    await sink.record(Record("prompt"))
    await sink.aclose()
    await sink.aclose()
    with pytest.raises(SinkClosedError) as info:
        await sink.record(Record("prompt"))
    assert str(info.value) == f"record() on a closed SqliteSink ({db})"
    assert sink.statistics().closed


async def test_tampering_in_the_database_is_found(db: Path) -> None:
    sink = SqliteSink(db)
    await record_many(sink, 1, 5)
    await sink.aclose()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE entries SET call_id = 'x' WHERE seq = 3")
    conn.close()
    report = verify(db)
    assert (report.ok, report.first_bad, report.problem) == (False, 3, "edited")
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM entries WHERE seq = 3")
    conn.close()
    assert verify(db).message == f"{db}: entry 3 was deleted"


async def test_queries_by_path_run_kind_and_time(db: Path) -> None:
    sink = SqliteSink(db, clock=Ticking())
    paths = [("a/0001",), ("a/0001", "b/0002"), ("a/00010",), ("c/0003",), ()]
    for n, path in enumerate(paths):
        await sink.record(Record("tool_request" if n % 2 else "prompt", f"run-{n % 2}", path))
    assert [e.seq for e in await sink.query(path_prefix=["a/0001"])] == [1, 2]
    assert [e.seq for e in await sink.query(path_prefix=["a/0001", "b/0002"])] == [2]
    assert [e.seq for e in await sink.query(run_id="run-1")] == [2, 4]
    assert [e.seq for e in await sink.query(kind="prompt")] == [1, 3, 5]
    assert [
        e.seq for e in await sink.query(since="2025-01-02T00:00:02", until="2025-01-02T00:00:04")
    ] == [2, 3]
    assert [e.seq for e in await sink.query(kind="prompt", limit=2)] == [1, 3]
    await sink.aclose()
    assert [e.seq for e in tail(db, 2)] == [4, 5]
