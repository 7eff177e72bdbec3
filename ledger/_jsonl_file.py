"""Reading JSON Lines ledger files (sync file I/O, no trio)."""

from __future__ import annotations

import os
from array import array
from collections.abc import Sequence
from typing import Final, overload

from ._canonical import line_flaw
from ._chain import Chain
from ._check import NOT_CANONICAL, Flaw, Item
from ._encoding import decode_line, entry_hash
from ._errors import SinkError
from ._files import LOCKED, open_regular, try_lock
from ._oserror import describe

_CHUNK = 65536
_READ = 1 << 20
#: The line index keeps where every this many lines start.
_STRIDE = 64

MAX_LINE_BYTES: Final = 64 * 1024 * 1024
"""The longest ledger line (64 MiB, newline excluded) a JSON Lines sink writes
and :func:`ledger.verify` decodes; a longer line is reported as malformed."""


def read_item(line: bytes) -> Item:
    """Decode one complete ledger line (no newline) for checking.

    Returns:
      The entry, if the line is exactly its canonical encoding; else a
      :class:`Flaw` or the reason it is malformed. Never raises on content.
    """
    if len(line) > MAX_LINE_BYTES:
        return _too_long(len(line))
    try:
        entry = decode_line(line)
    except ValueError as exc:
        return str(exc)
    flaw = line_flaw(line, entry)
    return entry if flaw is None else Flaw(NOT_CANONICAL, flaw)


class LineItems(Sequence[Item]):
    """Ledger lines held in memory (no newlines), decoded and checked on access."""

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Item]: ...
    def __getitem__(self, index: int | slice) -> Item | Sequence[Item]:
        if isinstance(index, slice):
            return LineItems(self._lines[index])
        return read_item(self._lines[index])


class LineFile(Sequence[Item]):
    """The complete lines of an open ledger file, read, decoded and checked on access.

    Lines end in ``\\n`` only (entries escape every other line break). Only where
    every :data:`_STRIDE`-th line starts is kept (8 bytes per 64 lines, however
    short the lines: a hostile file of newlines alone must not cost 8 bytes a
    byte), so a ledger of any size is checked in bounded memory; a line is found
    from the mark before it, and the next line from the last one found, so reading
    in order costs one pass. Lines appended after the file was indexed are not
    seen. What follows the last ``\\n`` is the tail: empty unless a write was cut
    short (or something was put there).
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        marks = array("q", [0])
        count = 0  # complete lines so far
        tail_start = 0  # just after the last newline
        pos = 0
        while chunk := os.pread(fd, _READ, pos):
            newlines = chunk.count(b"\n")
            if newlines:
                # Marks fall on lines count+1 .. count+newlines (each starts after a newline).
                need = len(marks) * _STRIDE
                at = -1
                seen = 0
                while need <= count + newlines:
                    while seen < need - count:
                        at = chunk.index(b"\n", at + 1)
                        seen += 1
                    marks.append(pos + at + 1)
                    need += _STRIDE
                count += newlines
                tail_start = pos + chunk.rindex(b"\n") + 1
            pos += len(chunk)
        self._marks = marks
        self._count = count
        self._tail_start = tail_start
        # The last line found: its number, where it starts, where its newline is.
        self._cursor = (-1, 0, -1)
        self.size = pos  # when it was indexed

    def __len__(self) -> int:
        return self._count

    def _newline(self, pos: int) -> int:
        # The offset of the first newline at or after ``pos`` (one exists before the
        # tail), or of the end of the file if it was cut short since it was indexed.
        size = 1024  # most lines are short: read little first, more as a line goes on
        while chunk := os.pread(self._fd, size, pos):
            found = chunk.find(b"\n")
            if found != -1:
                return pos + found
            pos += len(chunk)
            size = min(2 * size, _READ)
        return pos

    def _bounds(self, index: int) -> tuple[int, int]:
        # Where line ``index`` starts and where its newline is.
        line, start, end = self._cursor
        if index == line:
            return start, end
        if index == line + 1:
            start = end + 1
        else:
            line = index - index % _STRIDE
            start = self._marks[line // _STRIDE]
            while line < index:
                start = self._newline(start) + 1
                line += 1
        end = self._newline(start)
        self._cursor = (index, start, end)
        return start, end

    def line(self, index: int) -> bytes | int:
        """Line ``index`` (no newline), or its length if it is over :data:`MAX_LINE_BYTES`."""
        start, end = self._bounds(index)
        length = end - start
        return length if length > MAX_LINE_BYTES else os.pread(self._fd, length, start)

    def tail(self) -> tuple[bytes, int]:
        """The first :data:`MAX_LINE_BYTES` + 1 bytes of the tail, and its length."""
        start = self._tail_start
        length = self.size - start
        return os.pread(self._fd, min(length, MAX_LINE_BYTES + 1), start), length

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Item]: ...
    def __getitem__(self, index: int | slice) -> Item | Sequence[Item]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        line = self.line(range(len(self))[index])
        if isinstance(line, int):
            return _too_long(line)
        return read_item(line)


def _too_long(length: int) -> str:
    return f"its line is {length} bytes, over the {MAX_LINE_BYTES}-byte limit"


def _rfind_newline(fd: int, end: int) -> int:
    """Return the offset of the last ``\\n`` before ``end``, or -1."""
    while end > 0:
        start = max(0, end - _CHUNK)
        found = os.pread(fd, end - start, start).rfind(b"\n")
        if found != -1:
            return start + found
        end = start
    return -1


def scan_end(fd: int) -> tuple[bytes | None, int, int]:
    """Find the last complete line of an open ledger file.

    Returns:
      The last complete line (without ``\\n``; ``None`` if there is none;
      only its first :data:`MAX_LINE_BYTES` + 1 bytes if it is longer), the
      offset just after it (where a torn tail starts), and the file size.
    """
    size = os.fstat(fd).st_size
    last = _rfind_newline(fd, size)
    if last == -1:
        return None, 0, size
    begin = _rfind_newline(fd, last) + 1
    return os.pread(fd, min(last - begin, MAX_LINE_BYTES + 1), begin), last + 1, size


def open_for_append(path: str) -> tuple[int, Chain, int]:
    """Open (creating, mode 0600) a ledger file for appending, take the writer's
    lock on it and find where its chain ends.

    Runs in a worker thread.

    Raises:
      SinkError: It cannot be opened, is not a regular file (see
        :func:`ledger._files.open_regular`), another sink writes it, it ends in a
        torn line, or its last entry is bad.
    """
    try:
        fd = open_regular(path, os.O_RDWR | os.O_APPEND)
    except OSError as exc:
        raise SinkError(path, describe(exc)) from exc
    try:
        if not try_lock(fd):
            raise SinkError(path, LOCKED)
        line, good_end, size = scan_end(fd)
        if good_end != size:
            raise SinkError(
                path,
                f"it ends with a torn line ({size - good_end} bytes after the last newline);"
                f" run `python -m ledger repair {path}` first",
            )
        if line is None:
            return fd, Chain(), size
        try:
            if len(line) > MAX_LINE_BYTES:
                raise ValueError(f"a line of {len(line)} bytes")
            last = decode_line(line)
            flaw = line_flaw(line, last)
            if flaw is not None:
                raise ValueError(f"not canonical: {flaw}")
        except ValueError as exc:
            raise SinkError(
                path, f"its last entry is malformed ({exc}); run `python -m ledger verify {path}`"
            ) from None
        if entry_hash(last) != last.hash:
            raise SinkError(
                path,
                f"its last entry (seq {last.seq}) does not match its hash;"
                f" run `python -m ledger verify {path}`",
            )
        return fd, Chain(last.seq, last.hash), size
    except OSError as exc:
        os.close(fd)
        raise SinkError(path, describe(exc)) from exc
    except BaseException:
        os.close(fd)
        raise
