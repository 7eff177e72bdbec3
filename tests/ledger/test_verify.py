from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

import attrs
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ledger import Chain, Entry, Record, VerifyError, check_chain, repair, verify
from ledger._jsonl_file import LineItems
from ledger.encoding import GENESIS, encode_entry, entry_hash

from ._helpers import TIME, chain_of, jsonl_bytes, records

CONTENT_FIELDS = (
    "time",
    "kind",
    "run_id",
    "path",
    "agent_id",
    "tool",
    "call_id",
    "arguments",
    "verdict",
    "reason",
    "result",
    "error",
    "duration",
    "data",
)


def changed(entry: Entry, name: str) -> Entry:
    """``entry`` with field ``name`` set to a different value of an allowed type."""
    value = getattr(entry, name)
    new: object
    if name == "duration":
        new = 1.5 if value is None else value + 1.0
    elif name == "path":
        new = (*value, "x")
    elif name == "data":
        new = {**value, "\x00added": 1}
    elif value is None:
        new = "x"
    else:
        new = value + "x"
    return attrs.evolve(entry, **{name: new})  # type: ignore[arg-type]


def rehash(entry: Entry) -> Entry:
    return attrs.evolve(entry, hash=entry_hash(entry))


def lines_of(entries: list[Entry]) -> list[bytes]:
    return [encode_entry(e).encode() for e in entries]


def check(lines: list[bytes]) -> tuple[int | None, str]:
    problem = check_chain(LineItems(lines)).problem
    return (None, "") if problem is None else (problem.seq, problem.kind)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[list[bytes], int, str]:
    """A sound chain with one mutation, where it is, and what it is."""
    recs = draw(st.lists(records, min_size=1, max_size=8))
    entries = chain_of(recs)
    n = len(entries)
    kinds = ["edit", "edit_seq", "edit_hash", "duplicate", "insert_weak"]
    if n >= 2:
        kinds += ["delete", "swap", "rehash_edit", "insert_forged"]
    kind = draw(st.sampled_from(kinds))
    if kind == "edit":
        p = draw(st.integers(0, n - 1))
        name = draw(st.sampled_from((*CONTENT_FIELDS, "prev_hash")))
        entries[p] = changed(entries[p], name)
        return lines_of(entries), p + 1, "edited"
    if kind == "edit_seq":
        p = draw(st.integers(0, n - 1))
        seq = draw(st.integers(0, n + 3).filter(lambda s: s != p + 1))
        entries[p] = attrs.evolve(entries[p], seq=seq)
        return lines_of(entries), p + 1, "edited"
    if kind == "edit_hash":
        p = draw(st.integers(0, n - 1))
        entries[p] = attrs.evolve(entries[p], hash=GENESIS)
        return lines_of(entries), p + 1, "edited"
    if kind == "rehash_edit":
        # Edited and re-hashed: found at the next entry, blamed on this one.
        p = draw(st.integers(0, n - 2))
        name = draw(st.sampled_from(CONTENT_FIELDS))
        entries[p] = rehash(changed(entries[p], name))
        return lines_of(entries), p + 1, "edited"
    if kind == "delete":
        p = draw(st.integers(0, n - 2))  # a chain cannot show its last entry deleted
        del entries[p]
        return lines_of(entries), p + 1, "deleted"
    if kind == "swap":
        p = draw(st.integers(0, n - 2))
        q = draw(st.integers(p + 1, n - 1))
        entries[p], entries[q] = entries[q], entries[p]
        return lines_of(entries), p + 1, "reordered"
    if kind == "duplicate":
        p = draw(st.integers(0, n - 1))
        q = draw(st.integers(p + 1, n))
        entries.insert(q, entries[p])
        return lines_of(entries), q + 1, "duplicated"
    if kind == "insert_forged":
        # A well-formed entry chained onto its predecessor, before a real entry.
        p = draw(st.integers(0, n - 1))
        chain = Chain(p, entries[p - 1].hash if p else GENESIS)
        forged, _ = chain.link(draw(records), TIME)
        assume(forged != entries[p])  # an identical one is a duplicate
        entries.insert(p, forged)
        return lines_of(entries), p + 1, "inserted"
    p = draw(st.integers(0, n - 1))
    forged = attrs.evolve(draw(st.sampled_from(entries)), error="forged")
    entries.insert(p, forged)
    return lines_of(entries), p + 1, "inserted"


@pytest.mark.slow
@given(st.lists(records, max_size=8))
def test_sound_chains_verify(recs: list[Record]) -> None:
    assert check(lines_of(chain_of(recs))) == (None, "")


@pytest.mark.slow
@given(mutated())
def test_one_mutation_is_found_exactly(case: tuple[list[bytes], int, str]) -> None:
    lines, seq, problem = case
    assert check(lines) == (seq, problem)


@pytest.mark.slow
@given(mutated())
def test_verify_reports_the_mutation_in_a_file(case: tuple[list[bytes], int, str]) -> None:
    lines, seq, problem = case
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "audit.jsonl")
        Path(path).write_bytes(b"".join(line + b"\n" for line in lines))
        report = verify(path)
    assert (report.ok, report.first_bad, report.problem) == (False, seq, problem)


@pytest.mark.slow
@given(st.lists(records, min_size=1, max_size=6), st.data())
def test_torn_last_line_is_reported_as_torn(recs: list[Record], data: st.DataObject) -> None:
    entries = chain_of(recs)
    whole = jsonl_bytes(entries)
    last = len(encode_entry(entries[-1]).encode()) + 1
    cut = data.draw(st.integers(1, last - 1))  # drop the newline and maybe more
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "audit.jsonl")
        Path(path).write_bytes(whole[:-cut])
        report = verify(path)
        assert (report.ok, report.first_bad, report.problem) == (
            False,
            len(entries),
            "torn last line",
        )
        assert report.entries == len(entries) - 1
        assert report.torn_bytes == last - cut
        # Only the newline gone: the entry is whole, and repair gives the newline back.
        assert report.torn_complete == (cut == 1)
        assert repair(path).ok
        kept = entries if cut == 1 else entries[:-1]
        assert Path(path).read_bytes() == jsonl_bytes(kept)


def write(tmp_path: Path, entries: list[Entry], tail: bytes = b"") -> str:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(jsonl_bytes(entries) + tail)
    return str(path)


def three() -> list[Entry]:
    return chain_of([Record("prompt"), Record("tool_request", tool="ls"), Record("run_end")])


def test_report_of_a_sound_ledger(tmp_path: Path) -> None:
    entries = three()
    path = write(tmp_path, entries)
    report = verify(path)
    assert report.ok
    assert (report.format, report.entries, report.first_bad, report.problem) == (
        "jsonl",
        3,
        None,
        "",
    )
    assert report.message == f"{path}: 3 entries, chain sound, head {entries[-1].hash}"
    assert report.head == entries[-1].hash


def test_empty_ledger_is_sound(tmp_path: Path) -> None:
    path = write(tmp_path, [])
    assert verify(path).message == f"{path}: 0 entries, chain sound, head {GENESIS}"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda e: [e[0], attrs.evolve(e[1], tool="rm"), e[2]],
            "entry 2 was edited: its hash does not match its content",
        ),
        (lambda e: [e[0], e[2]], "entry 2 was deleted"),
        (lambda e: [e[1], e[0], e[2]], "entry 1 is out of order: it is at position 2"),
        (lambda e: [e[0], e[1], e[1], e[2]], "entry 3 is a copy of entry 2"),
        (
            lambda e: [e[0], attrs.evolve(e[2], error="x"), e[1], e[2]],
            "an entry was inserted at position 2, before the real entry 2",
        ),
        (
            lambda e: [rehash(attrs.evolve(e[0], run_id="other")), e[1], e[2]],
            "entry 1 was edited: entry 2 records a different hash for it",
        ),
        (
            lambda e: [rehash(attrs.evolve(e[0], prev_hash="1" * 64)), e[1], e[2]],
            "entry 1 was edited: it does not start a chain",
        ),
    ],
)
def test_messages_name_entry_and_problem(tmp_path: Path, mutate: object, message: str) -> None:
    path = write(tmp_path, mutate(three()))  # type: ignore[operator]
    assert verify(path).message == f"{path}: {message}"


def test_gap_of_several_entries(tmp_path: Path) -> None:
    entries = chain_of([Record("prompt")] * 5)
    path = write(tmp_path, [entries[0], entries[4]])
    report = verify(path)
    assert (report.first_bad, report.problem) == (2, "deleted")
    assert report.message == f"{path}: entries 2 to 4 were deleted"


def test_malformed_line_in_the_middle(tmp_path: Path) -> None:
    entries = three()
    path = tmp_path / "audit.jsonl"
    lines = jsonl_bytes(entries).split(b"\n")
    lines[1] = lines[1][:-5]
    path.write_bytes(b"\n".join(lines))
    report = verify(path)
    assert (report.first_bad, report.problem) == (2, "malformed")
    assert report.message == f"{path}: entry 2 is malformed: not valid JSON"


def test_tampering_is_reported_before_a_torn_line(tmp_path: Path) -> None:
    entries = three()
    path = write(tmp_path, [entries[0], entries[2]], tail=b'{"seq":4')
    report = verify(path)
    assert (report.first_bad, report.problem, report.torn_bytes) == (2, "deleted", 0)
    assert repair(path) == report
    assert Path(path).read_bytes().endswith(b'{"seq":4')


def test_torn_message(tmp_path: Path) -> None:
    path = write(tmp_path, three(), tail=b'{"seq":4,"ti')
    assert verify(path).message == f"{path}: entry 4 is a torn last line (12 bytes, no newline)"


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"
    with pytest.raises(VerifyError) as info:
        verify(path)
    assert str(info.value) == f"cannot read ledger {path}: No such file or directory"


def test_database_without_entries_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(VerifyError) as info:
        verify(path)
    assert str(info.value) == (
        f"cannot read ledger {path}: no 'entries' table: not a ledger database"
    )
