"""Verification of ledger files, JSON Lines or SQLite (sync file I/O, no trio)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Sequence
from typing import Literal, overload

import attrs

from ._check import HEAD_MISSING, TORN, ChainCheck, Item, Problem, check_chain
from ._errors import VerifyError
from ._files import try_lock
from ._jsonl_file import MAX_LINE_BYTES, LineFile, read_item
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
    """Whether the whole ledger is one sound chain (holding the pinned head, if
    one was given)."""
    entries: int
    """How many entries (complete lines, or rows) the ledger holds."""
    first_bad: int | None
    """The first bad sequence number, or ``None`` when ``ok``."""
    problem: str
    """What is wrong at ``first_bad``: ``"edited"``, ``"inserted"``,
    ``"deleted"``, ``"reordered"``, ``"duplicated"``, ``"malformed"``, ``"not
    canonical"``, ``"torn last line"`` or ``"pinned head missing"``; ``""``
    when ``ok``."""
    message: str
    """One line for people, naming the file, and the entry and problem if any."""
    head: str
    """The hash of the last entry before ``first_bad`` (of the last entry when ``ok``)."""
    torn_bytes: int = 0
    """The length of a torn last line (JSONL only), else 0."""
    torn_complete: bool = False
    """Whether the torn last line is a whole entry that continues the chain and
    lacks only its final newline (:func:`repair` adds the newline back)."""
    pinned_seq: int | None = None
    """The sequence number of the entry whose hash is the pinned ``head`` given
    to :func:`verify` (0 for :data:`GENESIS`); ``None`` if none was given or
    no sound entry has it."""


def open_ledger(path: str) -> int:
    """Open the ledger file at ``path`` for reading; return the descriptor.

    Opened without blocking (a FIFO put in its place is not waited on) and checked
    on the descriptor to be a regular file: a FIFO or a device (``/dev/zero``,
    read forever) is refused, never read.

    Raises:
      VerifyError: It cannot be opened, or is not a regular file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise VerifyError(f"cannot read ledger {path}: {exc.strerror or exc}") from exc
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError as exc:
        os.close(fd)
        raise VerifyError(f"cannot read ledger {path}: {exc.strerror or exc}") from exc
    if not regular:
        os.close(fd)
        raise VerifyError(f"cannot read ledger {path}: it is not a regular file")
    return fd


def detect_format(path: str) -> Format:
    """Return the format of the ledger file at ``path``.

    Raises:
      VerifyError: The file cannot be read, or is not a regular file.
    """
    fd = open_ledger(path)
    try:
        start = os.pread(fd, len(MAGIC), 0)
    except OSError as exc:
        raise VerifyError(f"cannot read ledger {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    return "sqlite" if start == MAGIC else "jsonl"


class _Appended(Sequence[Item]):
    """``items`` and then ``last``."""

    def __init__(self, items: Sequence[Item], last: Item) -> None:
        self._items = items
        self._last = last

    def __len__(self) -> int:
        return len(self._items) + 1

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Item]: ...
    def __getitem__(self, index: int | slice) -> Item | Sequence[Item]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        index = range(len(self))[index]
        return self._last if index == len(self._items) else self._items[index]


def _cut_short(tail: bytes) -> bool:
    """Whether ``tail`` can be what a crash left of a line being written.

    A cut line is never a whole JSON value (every entry ends in ``}``), nor
    longer than a sink writes: anything else after the last newline was put
    there, and is checked as an entry.
    """
    if len(tail) > MAX_LINE_BYTES:
        return False
    try:
        json.loads(tail.decode("utf-8", "surrogatepass"))
    except RecursionError:
        return False
    except ValueError:  # also a character cut in two (UnicodeDecodeError)
        return True
    return False


def _tail_problem(lines: Sequence[Item], tail: bytes, length: int) -> tuple[Problem, bool]:
    """The problem a last line without its newline is, and whether it is a whole
    entry that continues the chain (``lines`` form a sound chain).

    Args:
      lines: The complete lines.
      tail: The first :data:`MAX_LINE_BYTES` + 1 bytes after the last newline.
      length: How many bytes follow the last newline.
    """
    seq = len(lines) + 1
    if _cut_short(tail):
        detail = f"entry {seq} is a torn last line ({length} bytes, no newline)"
        return Problem(seq, TORN, detail), False
    problem = check_chain(_Appended(lines, read_item(tail))).problem
    if problem is not None:
        return problem, False
    detail = f"entry {seq} is whole but its line lacks the final newline ({length} bytes)"
    return Problem(seq, TORN, detail), True


def _report(
    path: str,
    fmt: Format,
    count: int,
    check: ChainCheck,
    pinned: str | None,
    tail: tuple[Problem, bool] | None = None,
    torn_bytes: int = 0,
) -> VerifyReport:
    problem = check.problem
    complete = False
    if problem is None and tail is not None:
        problem, complete = tail
    if problem is None and pinned is not None and check.pinned_seq is None:
        problem = Problem(
            count + 1,
            HEAD_MISSING,
            f"no entry has the pinned head {pinned[:16]}...: entries were cut from its end,"
            f" or it was rolled back or replaced (its {count} entries end at"
            f" {check.head[:16]}...)",
        )
    if problem is None:
        noun = "entry" if count == 1 else "entries"
        message = f"{path}: {count} {noun}, chain sound, head {check.head}"
        if check.pinned_seq is not None:
            since = count - check.pinned_seq
            message += f"; pinned head is entry {check.pinned_seq}, {since} added since"
        return VerifyReport(
            path, fmt, True, count, None, "", message, check.head, pinned_seq=check.pinned_seq
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
        torn_bytes if problem.kind == TORN else 0,
        complete,
        check.pinned_seq,
    )


def _verify_jsonl(name: str, pinned: str | None) -> VerifyReport:
    fd = open_ledger(name)
    try:
        lines = LineFile(fd)
        check = check_chain(lines, pinned=pinned)
        tail, length = lines.tail()
        found = None
        if length and check.problem is None:
            found = _tail_problem(lines, tail, length)
    except OSError as exc:
        raise VerifyError(f"cannot read ledger {name}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    return _report(name, "jsonl", len(lines), check, pinned, found, length)


def _pinned(head: str | None) -> str | None:
    if head is None:
        return None
    pinned = head.strip().lower()
    if len(pinned) != 64 or pinned.strip(_HEX):
        raise ValueError("a pinned head is 64 hexadecimal digits (an entry's SHA-256 hash)")
    return pinned


_HEX = "0123456789abcdef"


def verify(path: str | os.PathLike[str], *, head: str | None = None) -> VerifyReport:
    """Check a ledger file, JSON Lines or SQLite (recognised by its content).

    Every entry must be stored exactly as a sink stores it (a line that is
    its canonical encoding, byte for byte; a row as a sink writes it) and
    chain onto the one before. Nothing in the file makes it raise anything
    but :class:`VerifyError`: bad content is reported.

    Not a checkpoint: it reads the whole file synchronously (in bounded
    memory: 8 bytes per 64 lines, and one line at a time); from trio, run it with
    ``trio.to_thread.run_sync(verify, path)``.

    Args:
      path: The ledger file.
      head: A head recorded earlier (``report.head``, or ``python -m ledger
        head``). A hash chain alone cannot show entries cut from its end, or
        the whole file replaced by an older copy or a re-hashed forgery: with
        ``head``, the ledger is sound only if one of its sound entries has
        that hash (entries added since are fine).

    Returns:
      A report: ``ok``, or the first bad sequence number and what is wrong
      there. A last line cut short by a crash is reported as ``"torn last
      line"``, never as tampering.

    Raises:
      VerifyError: The file cannot be read, or is a database but not a ledger.
      ValueError: ``head`` is not 64 hexadecimal digits.
    """
    name = os.fspath(path)
    pinned = _pinned(head)
    if detect_format(name) == "sqlite":
        try:
            conn = connect_existing(name)
            try:
                items = RowItems(conn)
                check = check_chain(items, pinned=pinned)
                count = len(items)
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise VerifyError(f"cannot read ledger {name}: {exc}") from exc
        return _report(name, "sqlite", count, check, pinned)
    return _verify_jsonl(name, pinned)


def repair(path: str | os.PathLike[str]) -> VerifyReport:
    """Mend the torn last line of a JSON Lines ledger; change nothing else.

    A last line that is a whole entry continuing the chain gets its missing
    newline back; any other torn last line (an entry cut short by a crash)
    is removed. A ledger with any other problem is left as it is. Takes the
    writer's lock while it works, so it cannot cut a line a live sink is
    writing. Not a checkpoint (sync file I/O).

    Returns:
      The report after the repair: ``ok`` unless the ledger has another
      problem, which is left as it is.

    Raises:
      VerifyError: The file cannot be read or changed, or a sink has it open.
    """
    name = os.fspath(path)
    report = verify(name)
    if report.problem != TORN:
        return report
    try:
        fd = os.open(name, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
    except OSError as exc:
        raise VerifyError(f"cannot repair ledger {name}: {exc.strerror or exc}") from exc
    try:
        if not try_lock(fd):
            raise VerifyError(f"cannot repair ledger {name}: a sink is writing to it")
        report = verify(name)  # again, now that no sink can write
        if report.problem != TORN:
            return report
        if report.torn_complete:
            os.write(fd, b"\n")
        else:
            os.ftruncate(fd, os.fstat(fd).st_size - report.torn_bytes)
        os.fsync(fd)
    except OSError as exc:
        raise VerifyError(f"cannot repair ledger {name}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    return verify(name)
