"""Reading JSON Lines ledger files (sync file I/O, no trio)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import overload

from ._check import Item
from ._encoding import decode_line

_CHUNK = 65536


def split_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """Split a ledger file's bytes into complete lines and a torn tail.

    Lines are separated by ``\\n`` only (entries escape every other line
    break). The torn tail is what follows the last ``\\n``: empty unless a
    write was cut short.
    """
    lines = data.split(b"\n")
    torn = lines.pop()
    return lines, torn


class LineItems(Sequence[Item]):
    """The complete lines of a ledger file, decoded on access."""

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
        try:
            return decode_line(self._lines[index])
        except ValueError as exc:
            return str(exc)


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
      The last complete line (without ``\\n``; ``None`` if there is none),
      the offset just after it (where a torn tail starts), and the file size.
    """
    size = os.fstat(fd).st_size
    last = _rfind_newline(fd, size)
    if last == -1:
        return None, 0, size
    begin = _rfind_newline(fd, last) + 1
    return os.pread(fd, last - begin, begin), last + 1, size
