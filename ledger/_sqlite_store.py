"""SQLite ledger storage: schema, rows and reads (sync stdlib sqlite3, no trio)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Final, overload

from . import _crashpoints
from ._canonical import json_flaw
from ._check import NOT_CANONICAL, Flaw, Item
from ._encoding import entry_from_dict, parse_json, sorted_json
from ._entry import Entry, Record

MAGIC: Final = b"SQLite format 3\x00"
"""The first bytes of every SQLite database file."""

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    time TEXT NOT NULL,
    kind TEXT NOT NULL,
    run_id TEXT NOT NULL,
    path TEXT NOT NULL,
    path_key TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    tool TEXT,
    call_id TEXT,
    arguments TEXT,
    verdict TEXT,
    reason TEXT,
    result TEXT,
    error TEXT,
    duration,
    data TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_run_id ON entries (run_id);
CREATE INDEX IF NOT EXISTS entries_kind ON entries (kind);
CREATE INDEX IF NOT EXISTS entries_time ON entries (time);
CREATE INDEX IF NOT EXISTS entries_path_key ON entries (path_key);
"""
_COLUMNS: Final = (
    "seq, time, kind, run_id, path, path_key, agent_id, tool, call_id, arguments,"
    " verdict, reason, result, error, duration, data, prev_hash, hash"
)
INSERT: Final = f"INSERT INTO entries ({_COLUMNS}) VALUES ({', '.join('?' * 18)})"
_SELECT: Final = f"SELECT {_COLUMNS} FROM entries"
_NAMES: Final = tuple(_COLUMNS.split(", "))

Row = tuple[
    int,
    str,
    str,
    str,
    str,
    str,
    str,
    str | None,
    str | None,
    str | None,
    str | None,
    str | None,
    str | None,
    str | None,
    float | None,
    str,
    str,
    str,
]


def path_key(path: Iterable[str]) -> str:
    """Return the indexed form of an AgentPath: each segment followed by ``\\x1f``.

    A path's key starts with the key of each of its prefixes, so a prefix
    query is a range scan.
    """
    return "".join(f"{segment}\x1f" for segment in path)


def connect(path: str, *, fsync: bool, timeout: float) -> sqlite3.Connection:
    """Open (creating if needed) a ledger database for writing.

    WAL journal; ``synchronous=FULL`` when ``fsync`` else ``NORMAL`` (a commit
    survives the process being killed, not necessarily a power loss).
    The connection is in autocommit mode: callers ``BEGIN`` and ``COMMIT``.
    """
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
        k = _crashpoints.before("sqlite ledger: schema") if _crashpoints.ON else 0
        conn.executescript(_SCHEMA)
        if k:
            _crashpoints.after(k)
    except BaseException:
        conn.close()
        raise
    return conn


def _text(value: bytes) -> str | bytes:
    # Text that is not UTF-8 stays bytes, so the row is reported as malformed
    # where it is instead of failing the whole read.
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value


def connect_existing(path: str) -> sqlite3.Connection:
    """Open an existing ledger database for reading.

    A database with no table at all (a sink killed while creating it, before its
    schema was committed: :func:`connect` continues it) reads as an empty ledger:
    the connection gets an empty ``entries`` table of its own (``TEMP``; nothing is
    written to the file).

    Raises:
      sqlite3.DatabaseError: It is not a ledger database (it has tables, and no
        ``entries`` table).
    """
    conn = sqlite3.connect(path, isolation_level=None)
    conn.text_factory = _text
    try:
        found = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'entries'"
        ).fetchone()
        if found != (1,) and conn.execute(
                "SELECT count(*) FROM sqlite_master").fetchone() == (0,):
            conn.executescript(_SCHEMA.replace("CREATE TABLE", "CREATE TEMP TABLE").replace(
                "CREATE INDEX IF NOT EXISTS ", "CREATE INDEX IF NOT EXISTS temp."))
        elif found != (1,):
            raise sqlite3.DatabaseError("no 'entries' table: not a ledger database")
    except BaseException:
        conn.close()
        raise
    return conn


def to_row(entry: Entry) -> Row:
    """Return the row that stores ``entry``."""
    e = entry
    return (
        e.seq,
        e.time,
        e.kind,
        e.run_id,
        sorted_json(list(e.path)),
        path_key(e.path),
        e.agent_id,
        e.tool,
        e.call_id,
        e.arguments,
        e.verdict,
        e.reason,
        e.result,
        e.error,
        e.duration,
        sorted_json(dict(e.data)) if e.data else "{}",
        e.prev_hash,
        e.hash,
    )


def check_storable(record: Record, when: str) -> None:
    """Raise now the error SQLite's driver raises for ``record`` stored at ``when``:
    a text, path segment or data key or value that is not valid UTF-8 (a lone
    surrogate, from a ``\\ud800`` escape in a model's JSON: a JSON Lines ledger
    keeps it), so that the sink refuses that record alone, when it is recorded,
    rather than failing the group commit of every record it shares. O(n) only in
    the text that is not ASCII; not a checkpoint.

    Raises:
      UnicodeEncodeError: The UTF-8 encoder's error for the first such text.
    """
    r = record
    # str's own methods: a str subclass may override isascii and encode.
    ascii_, encode = str.isascii, str.encode
    for text in (when, r.kind, r.run_id, r.agent_id, r.tool, r.call_id, r.arguments,
                 r.verdict, r.reason, r.result, r.error, *r.path):
        if text is not None and not ascii_(text):
            encode(text)
    for key, value in r.data.items():
        if not ascii_(key):
            encode(key)
        if isinstance(value, str) and not ascii_(value):
            encode(value)


def from_row(row: Sequence[object]) -> Entry:
    """Rebuild an entry from its row, checking every column's type.

    Raises:
      ValueError: The row does not hold an entry; the message says why.
    """
    for name, value in zip(_NAMES, row, strict=True):
        if isinstance(value, bytes):
            raise ValueError(f"column {name!r} is not UTF-8 text")
    (seq, time, kind, run_id, path, key, agent_id, tool, call_id, arguments) = row[:10]
    (verdict, reason, result, error, duration, data, prev_hash, hash) = row[10:]
    try:
        path_list = parse_json(path) if isinstance(path, str) else None
    except ValueError as exc:
        raise ValueError(f"column 'path': {exc}") from None
    try:
        data_dict = parse_json(data) if isinstance(data, str) else None
    except ValueError as exc:
        raise ValueError(f"column 'data': {exc}") from None
    entry = entry_from_dict(
        {
            "seq": seq,
            "time": time,
            "kind": kind,
            "run_id": run_id,
            "path": path_list,
            "agent_id": agent_id,
            "tool": tool,
            "call_id": call_id,
            "arguments": arguments,
            "verdict": verdict,
            "reason": reason,
            "result": result,
            "error": error,
            "duration": duration,
            "data": data_dict,
            "prev_hash": prev_hash,
            "hash": hash,
        }
    )
    if key != path_key(entry.path):
        raise ValueError("column 'path_key' does not match column 'path'")
    return entry


def row_flaw(row: Sequence[object], entry: Entry) -> str | None:
    """Why ``row`` (which decodes to ``entry``) is not the row a sink stores for
    ``entry``, or ``None`` if it is."""
    for name, stored, wanted in zip(_NAMES, row, to_row(entry), strict=True):
        if type(stored) is not type(wanted) or stored != wanted:
            if isinstance(stored, str) and name in ("path", "data"):
                return f"column {name!r}: {json_flaw(stored)}"
            return f"column {name!r} is not what a sink stores for its content"
    return None


def read_row(row: Sequence[object]) -> Item:
    """Decode one row for checking: the entry if the row is exactly what a sink
    stores for it, else a :class:`Flaw` or the reason it is malformed."""
    try:
        entry = from_row(row)
    except ValueError as exc:
        return str(exc)
    flaw = row_flaw(row, entry)
    return entry if flaw is None else Flaw(NOT_CANONICAL, flaw)


def last_entry(conn: sqlite3.Connection) -> Entry | None:
    """Return the entry with the highest sequence number, or ``None``.

    Raises:
      ValueError: That row does not hold an entry.
    """
    row = conn.execute(f"{_SELECT} ORDER BY seq DESC LIMIT 1").fetchone()
    return None if row is None else from_row(row)


class RowItems(Sequence[Item]):
    """The rows of a ledger database in ``seq`` order, decoded and checked on access."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._seqs: list[int] = [
            seq for (seq,) in conn.execute("SELECT seq FROM entries ORDER BY seq")
        ]

    def __len__(self) -> int:
        return len(self._seqs)

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Item]: ...
    def __getitem__(self, index: int | slice) -> Item | Sequence[Item]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        row = self._conn.execute(f"{_SELECT} WHERE seq = ?", (self._seqs[index],)).fetchone()
        # None: a seq that matches no row (NULL, in a table not made by a sink).
        return "its row cannot be read back by its seq" if row is None else read_row(row)


def select(
    conn: sqlite3.Connection,
    *,
    path_prefix: Sequence[str] | None,
    run_id: str | None,
    kind: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
    last: int | None = None,
) -> list[Entry]:
    """Return the entries matching every given filter, in ``seq`` order.

    ``limit`` keeps the first ones; ``last`` (without filters) the last ones.
    """
    if last is not None:
        rows = conn.execute(f"{_SELECT} ORDER BY seq DESC LIMIT ?", (last,)).fetchall()
        return [from_row(row) for row in reversed(rows)]
    where: list[str] = []
    args: list[object] = []
    if path_prefix:
        key = path_key(path_prefix)
        where.append("path_key >= ? AND path_key < ?")
        args += [key, key[:-1] + "\x20"]
    for column, value in (("run_id", run_id), ("kind", kind)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    if since is not None:
        where.append("time >= ?")
        args.append(since)
    if until is not None:
        where.append("time < ?")
        args.append(until)
    sql = _SELECT + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY seq"
    found: list[Entry] = []
    prefix = tuple(path_prefix or ())
    for row in conn.execute(sql, args):
        entry = from_row(row)
        if entry.path[: len(prefix)] == prefix:
            found.append(entry)
            if limit is not None and len(found) >= limit:
                break
    return found
