"""ByteReader: draws structured values from a fuzzer's bytes, so a byte-level fuzzer
(atheris, or hypothesis's ``st.binary``) reaches past a parser's first check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

TEXTS = ("", " ", "w", "worker", "a/b", "do it", "\x00", "é", "\ud800", "x" * 300, "0", "[x]")


class ByteReader:
    """Reads ``data`` front to back; once exhausted, every draw returns its smallest value."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        """The next byte, or 0 when none are left."""
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def below(self, n: int) -> int:
        """An integer in ``range(n)``."""
        return self.byte() % n

    def choice(self, options: Sequence[T]) -> T:
        """One of ``options``."""
        return options[self.below(len(options))]

    def text(self) -> str:
        """A short string: a stock awkward one, or some bytes decoded leniently."""
        if self.below(2):
            return self.choice(TEXTS)
        size = self.below(16)
        raw = self.data[self.pos:self.pos + size]
        self.pos += size
        return raw.decode("utf-8", "replace")

    def number(self) -> int | float:
        """An integer or float, including the edges (0, negatives, huge, inf, nan)."""
        return self.choice(
            (0, 1, 2, -1, 3, 10**20, 0.5, -0.5, 1e-300, float("inf"), float("nan"), 30.0)
        )
