"""What the pool knows of one transport to a server: whether it really ended, and why.

A server can answer a request with the JSON-RPC error the SDK uses for a closed
connection (``-32000``); only a :class:`Link` that ended means the connection did.
"""

from __future__ import annotations

from collections.abc import Callable

from ._stderr import StderrTail


class Link:
    """One transport's end, told by the transport itself (a stdio server's stdout
    ended, the server exited, or it broke a bound); ``on_end`` is called once then.
    An HTTP transport's link never ends: a ping tells whether the server is there.
    Not thread-safe."""

    def __init__(self, on_end: Callable[[], None] = lambda: None) -> None:
        self.ended = False
        self.reason = ""  # why it ended, completing "MCP server 'NAME' ..."
        self.stderr: StderrTail | None = None  # a stdio server's
        self._on_end = on_end

    def __repr__(self) -> str:
        return f"<Link ended={self.ended} reason={self.reason!r}>"

    def end(self, reason: str) -> None:
        """Mark the transport ended for ``reason``; later calls change nothing. Not a
        checkpoint."""
        if not self.ended:
            self.ended = True
            self.reason = reason
            self._on_end()

    def described(self, problem: str) -> str:
        """``problem``, with the end of the server's stderr when it wrote any."""
        shown = self.stderr.shown() if self.stderr is not None else ""
        return f"{problem}; its stderr ends: {shown}" if shown else problem
