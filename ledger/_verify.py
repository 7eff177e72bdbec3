"""Verification of ledger files, JSON Lines or SQLite (sync file I/O, no trio)."""

from __future__ import annotations

import os
import sqlite3
from typing import Literal

import attrs

from ._check import TORN, ChainCheck, Problem, check_chain
from ._errors import VerifyError
from ._jsonl_file import LineItems, split_lines
from ._sqlite_store import MAGIC, RowItems, connect_existing

Format = Literal["jsonl", "sqlite"]


@attrs.frozen
class VerifyReport:
    """What :func:`verify` found in a ledger."""

    path: str
    """The ledger file."""
    format: Format
    """``"jsonl"`` or ``"sqlite"``."""
    ok: bool
    """Whether the whole ledger is one sound chain."""
    entries: int
    """How many entries (complete lines, or rows) the ledger holds."""
    first_bad: int | None
    """The first bad sequence number, or ``None`` when ``ok``."""
    problem: str
    """What is wrong at ``first_bad``: ``"edited"``, ``"inserted"``,
    ``"deleted"``, ``"reordered"``, ``"duplicated"``, ``"malformed"`` or
    ``"torn last line"``; ``""`` when ``ok``."""
    message: str
    """One line for people, naming the file, and the entry and problem if any."""
    head: str
    """The hash of the last entry before ``first_bad`` (of the last entry when ``ok``)."""
    torn_bytes: int = 0
    """The length of a torn last line (JSONL only), else 0."""


def detect_format(path: str) -> Format:
    """Return the format of the ledger file at ``path``.

    Raises:
      VerifyError: The file cannot be read.
    """
    try:
        with open(path, "rb") as file:
            start = file.read(len(MAGIC))
    except OSError as exc:
        raise VerifyError(f"cannot read ledger {path}: {exc.strerror or exc}") from exc
    return "sqlite" if start == MAGIC else "jsonl"


def _report(path: str, fmt: Format, count: int, check: ChainCheck, torn: bytes) -> VerifyReport:
    problem = check.problem
    if problem is None and torn:
        seq = count + 1
        problem = Problem(
            seq, TORN, f"entry {seq} is a torn last line ({len(torn)} bytes, no newline)"
        )
    if problem is None:
        noun = "entry" if count == 1 else "entries"
        return VerifyReport(
            path, fmt, True, count, None, "", f"{path}: {count} {noun}, chain sound", check.head
        )
    return VerifyReport(
        path,
        fmt,
        False,
        count,
        problem.seq,
        problem.kind,
        f"{path}: {problem.detail}",
        check.head,
        len(torn) if problem.kind == TORN else 0,
    )


def _read_jsonl(path: str) -> tuple[list[bytes], bytes]:
    try:
        with open(path, "rb") as file:
            return split_lines(file.read())
    except OSError as exc:
        raise VerifyError(f"cannot read ledger {path}: {exc.strerror or exc}") from exc


def verify(path: str | os.PathLike[str]) -> VerifyReport:
    """Check a ledger file, JSON Lines or SQLite (recognised by its content).

    Not a checkpoint: it reads the whole file synchronously; from trio, run it
    with ``trio.to_thread.run_sync(verify, path)``.

    Returns:
      A report: ``ok``, or the first bad sequence number and what is wrong
      there. A last line cut short by a crash is reported as ``"torn last
      line"``, never as tampering.

    A hash chain without a key cannot show entries cut from its end, or
    forged ones appended by someone who recomputes the hashes: to detect
    that, keep ``report.head`` (the last entry's hash) somewhere else and
    compare.

    Raises:
      VerifyError: The file cannot be read, or is a database but not a ledger.
    """
    name = os.fspath(path)
    if detect_format(name) == "sqlite":
        try:
            conn = connect_existing(name)
            try:
                items = RowItems(conn)
                return _report(name, "sqlite", len(items), check_chain(items), b"")
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise VerifyError(f"cannot read ledger {name}: {exc}") from exc
    lines, torn = _read_jsonl(name)
    return _report(name, "jsonl", len(lines), check_chain(LineItems(lines)), torn)


def repair(path: str | os.PathLike[str]) -> VerifyReport:
    """Remove a torn last line from a JSON Lines ledger; change nothing else.

    Only a ledger whose one problem is a torn last line is changed. Not a
    checkpoint (sync file I/O).

    Returns:
      The report after the repair: ``ok`` unless the ledger has another
      problem, which is left as it is.

    Raises:
      VerifyError: The file cannot be read or truncated.
    """
    report = verify(path)
    if report.problem != TORN:
        return report
    name = os.fspath(path)
    try:
        size = os.path.getsize(name)
        os.truncate(name, size - report.torn_bytes)
    except OSError as exc:
        raise VerifyError(f"cannot repair ledger {name}: {exc.strerror or exc}") from exc
    return verify(name)
