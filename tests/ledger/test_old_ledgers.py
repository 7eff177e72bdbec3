"""Ledgers written before issue 17 (lazy MemorySink chain, group writes, the writer
thread chaining SQLite entries) still verify, keep their bytes, and are continued.

``fixtures/before-issue-17.*`` were written by the code of commit 5475937 (eight
entries: unicode, escapes, line separators, data of every scalar type, int and
float durations, a two-segment path, a secret redacted by that code).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import attrs
import pytest

from ledger import Chain, JsonlSink, Record, SqliteSink, query, verify
from ledger.encoding import decode_line, encode_entry

FIXTURES = Path(__file__).parent / "fixtures"
ENTRIES = 8


@pytest.mark.parametrize("name", ["before-issue-17.jsonl", "before-issue-17.db"])
def test_an_old_ledger_verifies(name: str) -> None:
    report = verify(FIXTURES / name)
    assert (report.ok, report.entries) == (True, ENTRIES), report.message


def test_an_old_ledger_keeps_its_bytes() -> None:
    lines = (FIXTURES / "before-issue-17.jsonl").read_bytes().splitlines()
    assert len(lines) == ENTRIES
    chain = Chain()
    for line in lines:
        entry = decode_line(line)
        assert encode_entry(entry).encode("utf-8", "surrogatepass") == line
        fields = attrs.asdict(entry, recurse=False)
        for name in ("seq", "time", "prev_hash", "hash"):
            del fields[name]
        linked, _ = chain.link(Record(**fields), entry.time)
        assert linked == entry


@pytest.mark.parametrize("sink_type", [JsonlSink, SqliteSink])
async def test_an_old_ledger_is_continued(
    tmp_path: Path, sink_type: type[JsonlSink] | type[SqliteSink]
) -> None:
    suffix = ".jsonl" if sink_type is JsonlSink else ".db"
    path = tmp_path / f"copy{suffix}"
    shutil.copyfile(FIXTURES / f"before-issue-17{suffix}", path)
    old = query(path)
    sink = sink_type(path)
    entry = await sink.record(Record("run_end", "a/0002", ("a/0002",)))
    await sink.aclose()
    assert (entry.seq, entry.prev_hash) == (ENTRIES + 1, old[-1].hash)
    report = verify(path, head=entry.hash)
    assert (report.ok, report.entries) == (True, ENTRIES + 1), report.message
    assert query(path)[:ENTRIES] == old
