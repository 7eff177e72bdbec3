"""Reading JSON Lines ledger files (sync file I/O, no trio)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Final, overload

from ._canonical import line_flaw
from ._check import NOT_CANONICAL, Flaw, Item
from ._encoding import decode_line

_CHUNK = 65536

MAX_LINE_BYTES: Final = 64 * 1024 * 1024
"""The longest ledger line (64 MiB, newline excluded) a JSON Lines sink writes
and :func:`ledger.verify` decodes; a longer line is reported as malformed."""


def split_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """Split a ledger file's bytes into complete lines and a torn tail.

    Lines are separated by ``\\n`` only (entries escape every other line
    break). The torn tail is what follows the last ``\\n``: empty unless a
    write was cut short.
    """
    lines = data.split(b"\n")
    torn = lines.pop()
    return lines, torn


def read_item(line: bytes) -> Item:
    """Decode one complete ledger line (no newline) for checking.

    Returns:
      The entry, if the line is exactly its canonical encoding; else a
      :class:`Flaw` or the reason it is malformed. Never raises on content.
    """
    if len(line) > MAX_LINE_BYTES:
        return f"its line is {len(line)} bytes, over the {MAX_LINE_BYTES}-byte limit"
    try:
        entry = decode_line(line)
    except ValueError as exc:
        return str(exc)
    flaw = line_flaw(line, entry)
    return entry if flaw is None else Flaw(NOT_CANONICAL, flaw)


class LineItems(Sequence[Item]):
    """The complete lines of a ledger file, decoded and checked on access."""

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
