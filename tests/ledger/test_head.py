"""A pinned head: cutting a ledger's end, or rolling it back, no longer verifies."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from ledger import JsonlSink, Record, SqliteSink, verify
from ledger.__main__ import main
from ledger.encoding import GENESIS, entry_hash

from ._helpers import Ticking, chain_of, jsonl_bytes

ENTRIES = chain_of([Record("prompt", arguments=f"step {n}") for n in range(5)])
HEADS = [GENESIS] + [e.hash for e in ENTRIES]


def write(path: Path, count: int) -> Path:
    path.write_bytes(jsonl_bytes(ENTRIES[:count]))
    return path


def test_head_of_the_last_entry_verifies(tmp_path: Path) -> None:
    path = write(tmp_path / "audit.jsonl", 5)
    report = verify(path, head=HEADS[5])
    assert (report.ok, report.pinned_seq, report.head) == (True, 5, HEADS[5])
    assert report.message == (
        f"{path}: 5 entries, chain sound, head {HEADS[5]}; pinned head is entry 5, 0 added since"
    )


def test_entries_added_after_pinning_verify(tmp_path: Path) -> None:
    path = write(tmp_path / "audit.jsonl", 5)
    report = verify(path, head=HEADS[3].upper())
    assert (report.ok, report.pinned_seq) == (True, 3)
    assert report.message.endswith("; pinned head is entry 3, 2 added since")


def test_genesis_pins_an_empty_ledger(tmp_path: Path) -> None:
    path = write(tmp_path / "audit.jsonl", 0)
    assert verify(path, head=GENESIS).pinned_seq == 0
    assert verify(write(path, 2), head=GENESIS).pinned_seq == 0


@pytest.mark.parametrize("kept", [0, 1, 4])
def test_truncation_verifies_only_without_the_head(tmp_path: Path, kept: int) -> None:
    path = write(tmp_path / "audit.jsonl", kept)
    assert verify(path).ok  # what a hash chain alone cannot see
    report = verify(path, head=HEADS[5])
    assert (report.ok, report.first_bad, report.problem, report.pinned_seq) == (
        False,
        kept + 1,
        "pinned head missing",
        None,
    )
    assert report.message == (
        f"{path}: no entry has the pinned head {HEADS[5][:16]}...: entries were cut from its"
        f" end, or it was rolled back or replaced (its {kept} entries end at"
        f" {HEADS[kept][:16]}...)"
    )


async def test_rollback_to_an_older_copy_fails(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    backup = tmp_path / "old.jsonl"
    sink = JsonlSink(path, clock=Ticking())
    for n in range(3):
        await sink.record(Record("prompt", arguments=str(n)))
    await sink.aclose()
    shutil.copy(path, backup)
    sink = JsonlSink(path, clock=Ticking())
    for _ in range(3):
        await sink.record(Record("tool_result", result="rm -rf done"))
    await sink.aclose()
    pinned = verify(path).head
    shutil.copy(backup, path)
    assert verify(path).ok
    report = verify(path, head=pinned)
    assert (report.ok, report.problem, report.first_bad) == (False, "pinned head missing", 4)


def test_a_rehashed_forgery_fails(tmp_path: Path) -> None:
    # Whoever can write the file can rebuild a whole chain; only the pin shows it.
    entries = chain_of(
        [Record("prompt", arguments=f"step {n}") for n in range(4)]
        + [Record("prompt", arguments="nothing to see")]
    )
    path = tmp_path / "audit.jsonl"
    path.write_bytes(jsonl_bytes(entries))
    assert verify(path).ok
    assert entries[4].hash == entry_hash(entries[4]) != HEADS[5]
    assert verify(path, head=HEADS[5]).problem == "pinned head missing"
    assert verify(path, head=HEADS[4]).pinned_seq == 4  # the untouched prefix is still there


def test_a_chain_problem_is_reported_before_the_head(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(jsonl_bytes([ENTRIES[0], ENTRIES[2]]))
    report = verify(path, head=HEADS[1])
    assert (report.problem, report.first_bad, report.pinned_seq) == ("deleted", 2, 1)


@pytest.mark.parametrize("head", ["", "abc", "g" * 64, "0" * 63, "0" * 65])
def test_a_malformed_head_is_refused(tmp_path: Path, head: str) -> None:
    path = write(tmp_path / "audit.jsonl", 1)
    with pytest.raises(ValueError) as info:
        verify(path, head=head)
    assert str(info.value) == "a pinned head is 64 hexadecimal digits (an entry's SHA-256 hash)"


async def test_sqlite_truncation_and_rollback(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    sink = SqliteSink(path)
    for _ in range(5):
        await sink.record(Record("prompt"))
    await sink.aclose()
    pinned = verify(path).head
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM entries WHERE seq > 3")
    conn.close()
    assert verify(path).ok
    report = verify(path, head=pinned)
    assert (report.ok, report.format, report.problem, report.first_bad) == (
        False,
        "sqlite",
        "pinned head missing",
        4,
    )


# -- the command line -------------------------------------------------------------------


def test_cli_head_prints_the_hash_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "audit.jsonl", 5)
    assert main(["head", str(path)]) == 0
    assert capsys.readouterr().out == f"{HEADS[5]}\n"


def test_cli_head_refuses_an_unsound_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(jsonl_bytes(ENTRIES[:3]) + b'{"seq":4')
    assert main(["head", str(path)]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == f"{path}: entry 4 is a torn last line (8 bytes, no newline)\n"


def test_cli_verify_with_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "audit.jsonl", 5)
    assert main(["verify", str(path), "--head", HEADS[2]]) == 0
    assert capsys.readouterr().out == (
        f"{path}: 5 entries, chain sound, head {HEADS[5]}; pinned head is entry 2, 3 added since\n"
    )
    write(path, 2)
    assert main(["verify", str(path), "--head", HEADS[5]]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.startswith(f"{path}: no entry has the pinned head {HEADS[5][:16]}...")


def test_cli_refuses_a_malformed_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "audit.jsonl", 1)
    with pytest.raises(SystemExit) as info:
        main(["verify", str(path), "--head", "nope"])
    assert info.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: argument --head: a head is 64 hexadecimal digits\n"
    )


async def test_a_recorded_entry_hash_is_a_head(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "audit.jsonl")
    entry = await sink.record(Record("prompt"))
    await sink.aclose()
    assert verify(tmp_path / "audit.jsonl", head=entry.hash).pinned_seq == 1
