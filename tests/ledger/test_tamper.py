"""Lines that decode to a sound entry but are not its bytes, non-finite numbers, and
hostile content: each is reported at its sequence number, and nothing raises."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import ledger._jsonl
from ledger import (
    Chain,
    JsonlSink,
    Record,
    SinkError,
    SqliteSink,
    VerifyError,
    query,
    tail,
    verify,
)
from ledger.__main__ import main
from ledger._encoding import entry_to_dict
from ledger._jsonl_file import MAX_LINE_BYTES
from ledger._sqlite_store import _COLUMNS
from ledger.encoding import encode_entry

from ._helpers import chain_of, records

ENTRIES = chain_of(
    [
        Record("prompt", arguments="list files"),
        Record("tool_result", tool="ls", result="real", duration=0.25),
        Record("run_end", data={"turns": 2, "cost": 0.5}),
    ]
)
LINES = [encode_entry(e).encode() for e in ENTRIES]
NOT_CANONICAL = (
    "its bytes are not the canonical encoding of its content"
    " (member order, whitespace, escapes or number spelling differ)"
)


def write_lines(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def with_line(tmp_path: Path, seq: int, line: bytes) -> Path:
    lines = list(LINES)
    lines[seq - 1] = line
    return write_lines(tmp_path, lines)


def found(path: Path) -> tuple[bool, int | None, str, str]:
    report = verify(path)
    assert report.message.startswith(f"{path}: ")
    return report.ok, report.first_bad, report.problem, report.message[len(f"{path}: ") :]


# -- not the canonical bytes --------------------------------------------------------------


def test_a_duplicated_member_is_tampering(tmp_path: Path) -> None:
    # json.loads keeps the last value, so the hash checks out; other readers show "forged".
    line = LINES[1].replace(b'"result":"real"', b'"result":"forged","result":"real"')
    path = with_line(tmp_path, 2, line)
    assert found(path) == (
        False,
        2,
        "not canonical",
        "entry 2 is not canonical: member 'result' appears twice (a reader may show either value)",
    )


def test_a_duplicated_member_inside_data_is_tampering(tmp_path: Path) -> None:
    line = LINES[2].replace(b'"turns":2', b'"turns":9,"turns":2')
    assert found(with_line(tmp_path, 3, line))[1:] == (
        3,
        "not canonical",
        "entry 3 is not canonical: member 'turns' appears twice (a reader may show either value)",
    )


def reordered(entry_line: bytes) -> bytes:
    fields = json.loads(entry_line)
    return json.dumps(dict(reversed(fields.items())), separators=(",", ":")).encode()


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(reordered, id="reordered keys"),
        pytest.param(lambda b: b.replace(b'","', b'", "', 1), id="space between members"),
        pytest.param(lambda b: b" " + b, id="leading space"),
        pytest.param(lambda b: b + b" ", id="trailing space"),
        pytest.param(lambda b: b + b"\r", id="carriage return"),
        pytest.param(lambda b: b.replace(b'"ls"', b'"\\u006cs"'), id="escaped letter"),
        pytest.param(lambda b: b.replace(b'"real"', b'"re\\u0061l"'), id="escaped value"),
        pytest.param(lambda b: b.replace(b"0.25", b"2.5e-1"), id="number spelling"),
        pytest.param(lambda b: b.replace(b"0.25", b"0.250"), id="trailing zero"),
    ],
)
def test_other_spellings_of_the_same_entry_are_tampering(tmp_path: Path, spoil: object) -> None:
    line = spoil(LINES[1])  # type: ignore[operator]
    assert line != LINES[1]
    assert json.loads(line) == json.loads(LINES[1])  # the same content, other bytes
    assert found(with_line(tmp_path, 2, line)) == (
        False,
        2,
        "not canonical",
        f"entry 2 is not canonical: {NOT_CANONICAL}",
    )


SPELLINGS: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [
        {"separators": (", ", ": ")},
        {"indent": 0},
        {"sort_keys": True, "separators": (",", ": ")},
        {"sort_keys": False, "separators": (",", ":")},
        {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": True},
    ]
)


@pytest.mark.slow
@given(st.lists(records, min_size=1, max_size=5), st.data())
def test_any_other_spelling_is_found_where_it_is(recs: list[Record], data: st.DataObject) -> None:
    entries = chain_of(recs)
    lines = [encode_entry(e).encode("utf-8", "surrogatepass") for e in entries]
    index = data.draw(st.integers(0, len(lines) - 1))
    fields = entry_to_dict(entries[index])
    if data.draw(st.booleans()):
        fields = dict(reversed(fields.items()))
    spelled = json.dumps(fields, **data.draw(SPELLINGS)).replace("\n", "")
    line = spelled.encode("utf-8", "surrogatepass")
    assume(line != lines[index])
    lines[index] = line
    with tempfile.TemporaryDirectory() as tmp:
        path = write_lines(Path(tmp), lines)
        report = verify(path)
    assert (report.first_bad, report.problem) == (index + 1, "not canonical")


async def test_a_sink_does_not_append_after_a_non_canonical_last_line(tmp_path: Path) -> None:
    path = with_line(tmp_path, 3, LINES[2].replace(b'"turns":2', b'"turns":2 '))
    with pytest.raises(SinkError) as info:
        await JsonlSink(path).record(Record("prompt"))
    assert info.value.cause == (
        f"its last entry is malformed (not canonical: {NOT_CANONICAL});"
        f" run `python -m ledger verify {path}`"
    )


# -- non-finite and huge numbers ------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "seq", "why"),
    [
        (b"0.25", b"NaN", 2, "it holds NaN, a number no ledger writer produces"),
        (b"0.25", b"Infinity", 2, "it holds Infinity, a number no ledger writer produces"),
        (b"0.25", b"-Infinity", 2, "it holds -Infinity, a number no ledger writer produces"),
        (b"0.25", b"1e999", 2, "field 'duration' is inf, a number no ledger writer produces"),
        (
            b'"cost":0.5',
            b'"cost":-1e400',
            3,
            "field 'data' holds -inf (at 'cost'), a number no ledger writer produces",
        ),
        (b'"cost":0.5', b'"cost":NaN', 3, "it holds NaN, a number no ledger writer produces"),
        (b'"seq":2', b'"seq":1e999', 2, "field 'seq' is not an integer"),
        (b'"seq":2', b'"seq":' + b"9" * 5000, 2, "not valid JSON"),
    ],
)
def test_non_finite_and_huge_numbers_are_tampering(
    tmp_path: Path, old: bytes, new: bytes, seq: int, why: str
) -> None:
    line = LINES[seq - 1].replace(old, new)
    assert line != LINES[seq - 1]
    path = with_line(tmp_path, seq, line)
    assert found(path) == (False, seq, "malformed", f"entry {seq} is malformed: {why}")


def test_the_cli_reports_nan_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = with_line(tmp_path, 2, LINES[1].replace(b"0.25", b"NaN"))
    assert main(["verify", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"{path}: entry 2 is malformed: it holds NaN, a number no ledger writer produces\n"
    )
    assert main(["tail", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"error: cannot read ledger {path}: line 2: it holds NaN, a number no ledger writer"
        " produces\n"
    )


async def sqlite_ledger(path: Path) -> None:
    sink = SqliteSink(path)
    for entry in ENTRIES:
        await sink.record(
            Record(
                entry.kind,
                tool=entry.tool,
                result=entry.result,
                duration=entry.duration,
                data=entry.data,
                arguments=entry.arguments,
            )
        )
    await sink.aclose()


@pytest.mark.parametrize(
    ("sql", "seq", "problem", "why"),
    [
        (
            "UPDATE entries SET duration = 9e999 WHERE seq = 2",
            2,
            "malformed",
            "field 'duration' is inf, a number no ledger writer produces",
        ),
        (
            "UPDATE entries SET duration = -9e999 WHERE seq = 2",
            2,
            "malformed",
            "field 'duration' is -inf, a number no ledger writer produces",
        ),
        (
            """UPDATE entries SET data = '{"cost":NaN,"turns":2}' WHERE seq = 3""",
            3,
            "malformed",
            "column 'data': it holds NaN, a number no ledger writer produces",
        ),
        (
            """UPDATE entries SET data = '{"cost":0.5,"turns":9,"turns":2}' WHERE seq = 3""",
            3,
            "not canonical",
            "column 'data': member 'turns' appears twice (a reader may show either value)",
        ),
        (
            """UPDATE entries SET data = '{"turns":2,"cost":0.5}' WHERE seq = 3""",
            3,
            "not canonical",
            f"column 'data': {NOT_CANONICAL}",
        ),
        (
            """UPDATE entries SET path = '[ ]' WHERE seq = 1""",
            1,
            "not canonical",
            f"column 'path': {NOT_CANONICAL}",
        ),
        (
            "UPDATE entries SET kind = CAST(X'FF' AS TEXT) WHERE seq = 2",
            2,
            "malformed",
            "column 'kind' is not UTF-8 text",
        ),
        (
            "UPDATE entries SET path = '" + "[" * 100_000 + "' WHERE seq = 1",
            1,
            "malformed",
            "column 'path': not valid JSON: nested too deeply",
        ),
    ],
)
async def test_sqlite_tampering_in_stored_form(
    tmp_path: Path, sql: str, seq: int, problem: str, why: str
) -> None:
    path = tmp_path / "audit.db"
    await sqlite_ledger(path)
    assert verify(path).ok
    with sqlite3.connect(path) as conn:
        conn.execute(sql)
    conn.close()
    report = verify(path)
    detail = f"entry {seq} is {problem}: {why}"
    assert (report.ok, report.first_bad, report.problem, report.message) == (
        False,
        seq,
        problem,
        f"{path}: {detail}",
    )


# -- hostile bytes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"\xff\xfe" + LINES[1][2:], "not valid UTF-8"),
        (b"[" * 200_000, "not valid JSON: nested too deeply"),
        (b"{" * 200_000, "not valid JSON"),
        (
            LINES[1].replace(b'"data":{}', b'"data":' + b"[" * 100_000 + b"]" * 100_000),
            "not valid JSON: nested too deeply",
        ),
        (b"\x00", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"null", "not a JSON object"),
    ],
)
def test_hostile_lines_are_malformed_not_errors(tmp_path: Path, line: bytes, why: str) -> None:
    path = with_line(tmp_path, 2, line)
    assert found(path) == (False, 2, "malformed", f"entry 2 is malformed: {why}")


def test_a_line_over_the_limit_is_not_decoded(tmp_path: Path) -> None:
    big = b"x" * (MAX_LINE_BYTES + 1)
    path = with_line(tmp_path, 2, big)
    del big
    assert found(path) == (
        False,
        2,
        "malformed",
        f"entry 2 is malformed: its line is {MAX_LINE_BYTES + 1} bytes, over the"
        f" {MAX_LINE_BYTES}-byte limit",
    )


async def test_a_sink_refuses_a_line_over_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger._jsonl, "MAX_LINE_BYTES", 400)
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    first = await sink.record(Record("prompt"))
    with pytest.raises(SinkError) as info:
        await sink.record(Record("tool_result", result="x" * 400))
    assert info.value.cause.startswith("the entry's line would be ")
    assert info.value.cause.endswith(" bytes, over the 400-byte limit of a ledger line")
    second = await sink.record(Record("run_end"))
    await sink.aclose()
    assert (first.seq, second.seq) == (1, 2)
    assert verify(path).ok


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\xff" * 100, id="not UTF-8, no newline"),
        pytest.param(b"\xff" * 100 + b"\n", id="not UTF-8"),
        pytest.param(b"\n" * 5, id="empty lines"),
        pytest.param(b"[" * 100_000 + b"\n", id="deep"),
        pytest.param(b'{"seq":' + b"1" * 10_000 + b"}\n", id="long integer"),
        pytest.param(b"NaN\nInfinity\n", id="constants"),
        pytest.param(b"SQLite format 3\x00" + b"\x00" * 200, id="broken database"),
    ],
)
def test_the_cli_never_shows_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes
) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(data)
    assert main(["verify", str(path)]) in (1, 2)
    assert main(["verify", str(path), "--head", "0" * 64]) in (1, 2)
    assert main(["head", str(path)]) in (1, 2)
    assert main(["repair", str(path)]) in (0, 1, 2)
    for argv in (["tail"], ["query"], ["tail", "--json"], ["query", "--json"]):
        assert main([*argv, str(path)]) in (0, 2)
    assert "Traceback" not in capsys.readouterr().err


def test_readers_report_hostile_lines_as_verify_errors(tmp_path: Path) -> None:
    path = with_line(tmp_path, 2, b"[" * 100_000)
    with pytest.raises(VerifyError) as info:
        query(path)
    assert str(info.value) == (
        f"cannot read ledger {path}: line 2: not valid JSON: nested too deeply"
    )
    with pytest.raises(VerifyError):
        tail(path)


def test_a_huge_integer_duration_is_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry, _ = Chain().link(Record("tool_result", duration=10**400), "2025-01-02T00:00:00Z")
    path = write_lines(tmp_path, [encode_entry(entry).encode()])
    assert verify(path).ok
    assert main(["tail", str(path)]) == 0
    assert capsys.readouterr().out.endswith(f"duration={10**400}s\n")
    assert os.path.getsize(path) > 400


def test_a_hand_made_table_with_a_null_seq_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE entries ({_COLUMNS})")  # no INTEGER PRIMARY KEY
        conn.execute("INSERT INTO entries (seq) VALUES (NULL)")
    conn.close()
    assert found(path) == (
        False,
        1,
        "malformed",
        "entry 1 is malformed: its row cannot be read back by its seq",
    )
