"""Stdio framing, sans I/O: a byte stream cut into lines of bounded length, and a
cheap bound on how many JSON values one line holds, checked before it is parsed.

Parsing a JSON message costs far more memory than its bytes: a 4 MiB line of small
values (``[0,0,0,...]`` or ``{"a":0,...}``) becomes millions of objects. Counting the
values first, with a scan that allocates nothing per value, refuses such a line
before the parser sees it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ._config import McpServerError

#: The most JSON values one stdio message may hold: 65,536 (each array item, object
#: key and object value counts; an empty array or object counts as one more).
MAX_VALUES = 65536

# A string (closed or not: an unclosed one runs to the end, so the scan stays linear),
# or one byte of structure that starts a value: ``[``, ``{``, ``,`` or ``:``.
_TOKEN = re.compile(rb'"(?:[^"\\]++|\\.)*+"?|[\[{,:]', re.DOTALL)


class McpMessageError(McpServerError):
    """A message an MCP server sent breaks a bound of the framing (its size or the
    number of JSON values in it); the message names the bound."""


def count_values(data: bytes, stop: int = MAX_VALUES) -> int:
    """How many JSON values ``data`` holds: array items, object keys and object values
    (an empty array or object counts one too many), not what is inside strings. The
    count stops once it passes ``stop``. Not a checkpoint.

    Linear in ``len(data)`` (an unclosed string runs to the end), with no allocation
    per value.
    """
    count = 1
    for match in _TOKEN.finditer(data):
        if data[match.start()] != 0x22:  # not a string
            count += 1
            if count > stop:
                break
    return count


def check_values(data: bytes) -> None:
    """Refuse a message with more than :data:`MAX_VALUES` JSON values, before it is
    parsed. Not a checkpoint.

    Raises:
      McpMessageError: it holds more; the message names the bound.
    """
    # Counted with bytes inside strings first (fast, and an upper bound): only a
    # message over the bound by that count is scanned string by string.
    quick = 1 + sum(data.count(c) for c in (b"[", b"{", b",", b":"))
    if quick > MAX_VALUES and count_values(data) > MAX_VALUES:
        raise McpMessageError(
            f"a message holds more than {MAX_VALUES} JSON values (MAX_VALUES)"
        )


class Lines:
    """Cuts a byte stream into lines (without their ``\\n``) of at most ``limit``
    bytes. A longer line is given as ``None``, once, as soon as it passes the limit
    (so at most ``limit`` bytes are ever held), and the rest of it is skipped. Bytes
    after the last ``\\n`` are held until more come. Not thread-safe; sans I/O."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._skipping = False  # inside a line already given as None

    def __repr__(self) -> str:
        return f"<Lines limit={self.limit} held={len(self._buffer)} skipping={self._skipping}>"

    def feed(self, chunk: bytes | bytearray) -> Iterator[bytes | None]:
        """The lines ``chunk`` completes, in order; ``None`` for each line past the
        limit. Lazy: stop iterating and the rest of ``chunk`` is lost."""
        view = memoryview(chunk)
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = view[start:end]
            start = end + 1
            if self._skipping:
                self._skipping = False
            elif len(self._buffer) + len(piece) > self.limit:
                self._buffer.clear()
                yield None
            elif self._buffer:
                self._buffer += piece
                line = bytes(self._buffer)
                self._buffer.clear()
                yield line
            else:
                yield bytes(piece)
        if self._skipping or start == len(chunk):
            return
        if len(self._buffer) + len(chunk) - start > self.limit:
            self._buffer.clear()
            self._skipping = True
            yield None
        else:
            self._buffer += view[start:]
