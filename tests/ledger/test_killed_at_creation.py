"""A SQLite ledger whose writer was SIGKILLed while creating it (the database file
made, its schema not yet committed) is an empty ledger for every reader, as it is
for ``SqliteSink``, which continues it (issue 32 item 4). Before, ``verify`` and
``query`` refused it ("not a ledger database") while the sink went on writing it."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from ledger import Record, SqliteSink, VerifyError, query, verify

# The real sink, its process killed when it creates the schema (first executescript).
KILLED = """
import os, signal, sqlite3, sys
import trio
from ledger import Record, SqliteSink

class Killed(sqlite3.Connection):
    def executescript(self, script):
        os.kill(os.getpid(), signal.SIGKILL)

real = sqlite3.connect
sqlite3.connect = lambda *args, **kwargs: real(*args, factory=Killed, **kwargs)

async def main():
    await SqliteSink(sys.argv[1]).record(Record("prompt", run_id="a/0001"))

trio.run(main)
"""


@pytest.mark.slow
def test_a_ledger_killed_at_creation_verifies_empty_and_is_continued(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    done = subprocess.run([sys.executable, "-c", KILLED, str(path)], check=False,
                          capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    with sqlite3.connect(path) as conn:  # the file is a database without a table
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    report = verify(path)
    assert (report.ok, report.format, report.entries) == (True, "sqlite", 0)
    assert query(path) == []

    async def go_on() -> None:
        sink = SqliteSink(path)
        await sink.record(Record("prompt", run_id="a/0001"))
        await sink.aclose()

    trio.run(go_on)
    report = verify(path)
    assert (report.ok, report.entries) == (True, 1)
    assert [e.run_id for e in query(path)] == ["a/0001"]


def test_a_database_with_other_tables_is_still_not_a_ledger(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(VerifyError) as info:
        verify(path)
    assert str(info.value) == (
        f"cannot read ledger {path}: no 'entries' table: not a ledger database")
    assert os.path.getsize(path) > 0
