"""Reading JSON Lines ledger files (sync file I/O, no trio)."""

from __future__ import annotations

import os
from array import array
from collections.abc import Sequence
from typing import Final, overload

from ._canonical import line_flaw
from ._check import NOT_CANONICAL, Flaw, Item
from ._encoding import decode_line

_CHUNK = 65536
_READ = 1 << 20

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

    Lines end in ``\\n`` only (entries escape every other line break). Only
    where each line starts is kept (8 bytes a line), so a ledger of any size
    is checked in bounded memory; lines appended after the file was indexed
    are not seen. What follows the last ``\\n`` is the tail: empty unless a
    write was cut short (or something was put there).
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        starts = array("q", [0])
        pos = 0
        while chunk := os.pread(fd, _READ, pos):
            find = chunk.find
            at = find(b"\n")
            while at != -1:
                starts.append(pos + at + 1)
                at = find(b"\n", at + 1)
            pos += len(chunk)
        self._starts = starts
        self.size = pos  # when it was indexed

    def __len__(self) -> int:
        return len(self._starts) - 1

    def line(self, index: int) -> bytes | int:
        """Line ``index`` (no newline), or its length if it is over :data:`MAX_LINE_BYTES`."""
        start = self._starts[index]
        length = self._starts[index + 1] - 1 - start
        return length if length > MAX_LINE_BYTES else os.pread(self._fd, length, start)

    def tail(self) -> tuple[bytes, int]:
        """The first :data:`MAX_LINE_BYTES` + 1 bytes of the tail, and its length."""
        start = self._starts[-1]
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
