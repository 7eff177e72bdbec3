"""A stdio server's stderr: read through a pipe as it comes (never inherited by this
process, never held whole), its last :data:`MAX_STDERR` bytes kept, and at most
:data:`MAX_STDERR_SHOWN` characters of that shown in a failure report, with the
server's ``env`` and ``headers`` values written ``***`` and host paths cut to their
last part.
"""

from __future__ import annotations

import contextlib
import os
import re

import trio

from .._safe_text import one_line
from ._config import McpServer

#: The most bytes of a stdio server's stderr kept (the last ones): 8 KiB.
MAX_STDERR = 8 * 1024
#: The most characters of that shown in a failure report (the last ones).
MAX_STDERR_SHOWN = 500

# An absolute path's folders ("/home/someone/project/"), also after a colon
# ("PATH:/home/...", "C:/Users/...") and in a file URL ("file:///home/..."): what a
# report keeps of a path is its last part ("…/server.py"). A web URL's path
# ("https://host/a/b") is kept: a host name comes before it.
_FOLDERS = re.compile(r"(?:(?<![\w.~/])|(?<=file://))/(?:[^\s/'\"]+/)+")


class StderrTail:
    """The end of one server process's stderr. Not thread-safe."""

    def __init__(self, server: McpServer) -> None:
        self._server = server
        self._tail = bytearray()
        self.total = 0  # bytes the server wrote, kept or not

    def __repr__(self) -> str:
        kept, name = len(self._tail), self._server.name
        return f"<StderrTail server={name!r} kept={kept} total={self.total}>"

    def feed(self, chunk: bytes | bytearray) -> None:
        """Keep ``chunk``'s bytes, and of all so far only the last :data:`MAX_STDERR`."""
        self.total += len(chunk)
        self._tail += chunk[-MAX_STDERR:]
        if len(self._tail) > MAX_STDERR:
            del self._tail[:-MAX_STDERR]

    async def read(self, stream: trio.abc.ReceiveStream) -> None:
        """Read ``stream`` to its end (or until it breaks or is closed), keeping its
        tail. A checkpoint."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while chunk := await stream.receive_some(65536):
                self.feed(chunk)

    def drain(self, fd: int) -> None:
        """Keep what is already in the pipe at ``fd`` (non-blocking), without waiting
        for more: what a server wrote just before it exited. Not a checkpoint."""
        for _ in range(64):  # a pipe holds at most 64 chunks of 64 KiB, by default 1
            try:
                chunk = os.read(fd, 65536)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return
            self.feed(chunk)

    def shown(self) -> str:
        """The kept text as a report shows it: the server's ``env`` and ``headers``
        values of 8 characters or more written ``***`` (``McpServer.masked``), and
        when the window cut one (the kept text starts with its end) that end dropped,
        absolute paths cut to their last part, escaped onto one line, the last
        :data:`MAX_STDERR_SHOWN` characters (``…`` first when cut). Empty when the
        server wrote nothing."""
        text = self._server.masked(self._tail.decode("utf-8", "replace"))
        if self.total > len(self._tail):
            text = text.lstrip("\ufffd")  # a character the window cut
            text = text[_cut_secret(text, self._server):]
        text = one_line(_FOLDERS.sub("…/", text.strip()))
        if len(text) > MAX_STDERR_SHOWN or self.total > len(self._tail):
            return "…" + text[-(MAX_STDERR_SHOWN - 1):]
        return text


def _cut_secret(text: str, server: McpServer) -> int:
    # How many characters ``text`` (a tail the window cut) starts with that end an
    # ``env`` or ``headers`` value of 8 characters or more: the most of any.
    first = text[:1]
    longest = 0
    for value in (*server.env.values(), *server.headers.values()):
        if len(value) < 8 or not first:
            continue
        at = value.find(first, 1)
        while at > 0:  # the value's end from ``at`` on, if text starts with it
            if len(value) - at > longest and text.startswith(value[at:]):
                longest = len(value) - at
                break
            at = value.find(first, at + 1)
    return longest
