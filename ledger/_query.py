"""Reading entries back: queries and the tail of a ledger (sync file I/O, no trio)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Generator, Sequence
from functools import partial

from ._encoding import decode_line
from ._entry import Entry
from ._errors import VerifyError
from ._jsonl_file import MAX_LINE_BYTES, LineFile
from ._sqlite_store import connect_existing, select
from ._verify import detect_format, open_ledger


def _jsonl_entries(path: str, last: int | None = None) -> Generator[Entry, None, None]:
    fd = open_ledger(path)
    try:
        lines = LineFile(fd)
        start = 0 if last is None else max(0, len(lines) - last)
        for index in range(start, len(lines)):
            line = lines.line(index)
            try:
                if isinstance(line, int):
                    raise ValueError(f"{line} bytes, over the {MAX_LINE_BYTES}-byte limit")
                entry = decode_line(line)
            except ValueError as exc:
                raise VerifyError(f"cannot read ledger {path}: line {index + 1}: {exc}") from None
            yield entry
    except OSError as exc:
        raise VerifyError(f"cannot read ledger {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def _read_sqlite(name: str, read: Callable[[sqlite3.Connection], list[Entry]]) -> list[Entry]:
    """What ``read`` finds in the ledger database ``name``, through a connection of its
    own; any failure is a VerifyError."""
    try:
        conn = connect_existing(name)
        try:
            return read(conn)
        finally:
            conn.close()
    except (sqlite3.Error, ValueError) as exc:
        raise VerifyError(f"cannot read ledger {name}: {exc}") from exc


def query(
    path: str | os.PathLike[str],
    *,
    path_prefix: Sequence[str] | None = None,
    run_id: str | None = None,
    kind: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int | None = None,
) -> list[Entry]:
    """Return the entries of a ledger file matching every given filter, in order.

    Works on either format; on SQLite the filters use indexes. Not a
    checkpoint (sync I/O); it does not verify the chain (see
    :func:`ledger.verify`).

    Args:
      path: The ledger file.
      path_prefix: Entries whose AgentPath starts with these segments.
      run_id: Entries of this run.
      kind: Entries of this kind.
      since: Entries at or after this time (ISO-8601 text, compared as text:
        ``"2025-01-02"`` and ``"2025-01-02T10:00:00Z"`` both work).
      until: Entries before this time (same form).
      limit: At most this many (the first ones).

    Raises:
      VerifyError: The file cannot be read or holds a line that is not an entry.
    """
    name = os.fspath(path)
    if detect_format(name) == "sqlite":
        return _read_sqlite(
            name,
            partial(
                select,
                path_prefix=path_prefix,
                run_id=run_id,
                kind=kind,
                since=since,
                until=until,
                limit=limit,
            ),
        )
    prefix = tuple(path_prefix or ())
    found: list[Entry] = []
    if limit is not None and limit <= 0:
        return found
    with contextlib.closing(_jsonl_entries(name)) as entries:
        for entry in entries:
            if (
                entry.path[: len(prefix)] == prefix
                and (run_id is None or entry.run_id == run_id)
                and (kind is None or entry.kind == kind)
                and (since is None or entry.time >= since)
                and (until is None or entry.time < until)
            ):
                found.append(entry)
                if limit is not None and len(found) >= limit:
                    break
    return found


def tail(path: str | os.PathLike[str], count: int = 10) -> list[Entry]:
    """Return the last ``count`` entries of a ledger file, oldest first.

    A torn last line is skipped. Not a checkpoint (sync I/O).

    Raises:
      VerifyError: The file cannot be read or holds a line that is not an entry.
    """
    name = os.fspath(path)
    if count <= 0:
        return []
    if detect_format(name) == "sqlite":
        return _read_sqlite(
            name,
            partial(
                select,
                path_prefix=None,
                run_id=None,
                kind=None,
                since=None,
                until=None,
                limit=None,
                last=count,
            ),
        )
    return list(_jsonl_entries(name, last=count))
