"""ledger verification and its command line on arbitrary files, with and without a
pinned head: a report or a ``LedgerError`` from the API, exit status 0, 1 or 2 from
the CLI with no traceback, nothing else.

A quarter of the inputs are raw bytes (JSON Lines, or after SQLite's magic); the
rest edit a sound ledger (bytes changed, inserted, cut; rows of a sound SQLite
ledger set to awkward values), so the checks behind the parser are reached.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sqlite3
import tempfile

import ledger
from ledger.__main__ import main as cli
from ledger._sqlite_store import INSERT, MAGIC, connect, to_row

from ._bytes import ByteReader
from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (ledger.LedgerError,)
_DIR = tempfile.mkdtemp(prefix="fuzz-ledger-")

_CHAIN = ledger.Chain()
_ENTRIES = [
    _CHAIN.link(record, "2025-01-02T03:04:05.000000Z")[0]
    for record in (
        ledger.Record("prompt", "r1", ("a/0001",), arguments="hi é"),
        ledger.Record("tool_result", "r1", ("a/0001",), tool="ls", result="x\ny", duration=0.25),
        ledger.Record("run_end", "r1", ("a/0001",), data={"turns": 2, "cost": 0.5}),
    )
]
_JSONL = b"".join(f"{ledger.encoding.encode_entry(e)}\n".encode() for e in _ENTRIES)
_HEADS = [ledger.encoding.GENESIS, *(e.hash for e in _ENTRIES), "f" * 64]
_SQLITE = os.path.join(_DIR, "template.db")
with contextlib.closing(connect(_SQLITE, fsync=False, timeout=1.0)) as _conn:
    _conn.executemany(INSERT, [to_row(e) for e in _ENTRIES])
    _conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    _conn.execute("PRAGMA journal_mode=DELETE")
_COLUMNS = ("seq", "kind", "path", "path_key", "duration", "data", "prev_hash", "hash", "result")
_VALUES: tuple[object, ...] = (
    None,
    1,
    -1,
    2**62,
    0.5,
    float("inf"),
    float("-inf"),
    "",
    "[]",
    "{}",
    '["a/0001"]',
    '{"turns":NaN}',
    '{"turns":2,"turns":2}',
    "[" * 3000,
    b"\xff",
    ledger.encoding.GENESIS,
)


def _edit_jsonl(reader: ByteReader) -> bytes:
    data = bytearray(_JSONL)
    for _ in range(1 + reader.below(3)):
        where = reader.below(len(data) + 1)
        op = reader.below(4)
        if op == 0 and data:
            data[min(where, len(data) - 1)] = reader.byte()
        elif op == 1:
            data[where:where] = reader.choice((b" ", b"\n", b"NaN", b'"x":1,', b"\\u0041", b"["))
        elif op == 2:
            del data[where : where + 1 + reader.below(8)]
        else:
            del data[where:]
    return bytes(data)


def _edit_sqlite(path: str, reader: ByteReader) -> None:
    shutil.copyfile(_SQLITE, path)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for _ in range(1 + reader.below(2)):
            column = reader.choice(_COLUMNS)
            value = reader.choice(_VALUES)
            seq = 1 + reader.below(4)
            with contextlib.suppress(sqlite3.Error):  # e.g. a duplicate seq
                if reader.below(8) == 0:
                    conn.execute("DELETE FROM entries WHERE seq = ?", (seq,))
                else:
                    conn.execute(f"UPDATE entries SET {column} = ? WHERE seq = ?", (value, seq))


def _run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(list(argv))
    assert code in (0, 1, 2), code
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


def target(data: bytes) -> None:
    reader = ByteReader(data)
    mode = reader.below(4)
    if mode == 3:
        path = os.path.join(_DIR, "ledger.sqlite")
        _edit_sqlite(path, reader)
    else:
        path = os.path.join(_DIR, "ledger.jsonl")
        content = (
            _edit_jsonl(reader)
            if mode < 2
            else (MAGIC if reader.below(2) else b"") + data[reader.pos :]
        )
        with open(path, "wb") as f:
            f.write(content)
    head = reader.choice(_HEADS)
    try:
        report = ledger.verify(path)
    except ledger.LedgerError:
        report = None
    code = _run_cli("verify", path, "--head", head)[0]
    if report is None:
        assert code == 2
        return
    assert report.ok == (report.first_bad is None), report
    assert report.ok or report.problem, report
    pinned = ledger.verify(path, head=head)
    assert code == (0 if pinned.ok else 1)
    assert pinned.ok == (report.ok and pinned.pinned_seq is not None)
    if report.ok:
        again = ledger.verify(path, head=report.head)
        assert (again.ok, again.pinned_seq) == (True, report.entries)
        assert _run_cli("head", path)[:2] == (0, f"{report.head}\n")
    else:
        assert _run_cli("head", path)[0] == 1
    _run_cli("tail", path, "--json")
    code = _run_cli("repair", path)[0]
    if code == 0:
        assert ledger.verify(path).ok


if __name__ == "__main__":
    main(target, ALLOWED)
