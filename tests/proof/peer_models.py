"""A model server that misbehaves on purpose: real sockets on 127.0.0.1, in this trio
run, speaking the OpenAI or Anthropic streaming wire format to the project's adapters.

Each accepted connection is served by the server's current :class:`Behaviour`; the
server can be killed (its listener closed, its open connections reset) and brought
back on the same port.
"""

from __future__ import annotations

import enum
import json
import socket
from typing import Any

import attrs
import trio

#: Bytes of one request head read at most (the adapters send far less).
MAX_HEAD = 1 << 20


class Behaviour(enum.StrEnum):
    """How the server answers a request."""

    answer = "answer"
    """A whole, valid streamed reply."""
    partial_then_reset = "partial_then_reset"
    """The reply's head and half its body, then the connection is reset."""
    hang = "hang"
    """Reads the request, sends nothing, never closes."""
    held = "held"
    """Reads the request and sends nothing until ``release`` is set, then a whole,
    valid streamed reply."""
    drip = "drip"
    """A valid reply, one byte per second."""
    garbage = "garbage"
    """Bytes that are not HTTP."""
    oversized = "oversized"
    """A valid head, then an event stream without end (past any size cap)."""
    close = "close"
    """Reads the request and closes the connection without a byte."""


def _sse(data: Any) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


def reply_body(api: str, text: str) -> bytes:
    """A whole streamed reply saying ``text``, in ``api``'s format."""
    if api == "openai":
        return _sse(
            {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
        ) + b"data: [DONE]\n\n"
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    return b"".join(f"event: {e['type']}\n".encode() + _sse(e) for e in events)


HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Connection: close\r\n\r\n"
)


async def _read_body(stream: trio.SocketStream, data: bytes) -> None:
    """Read the rest of the request's body (its Content-Length): a server that closes
    with request bytes unread makes the kernel reset the connection, which the client
    would see as the server failing when the cell wants it to answer."""
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = min(int(value.strip()), MAX_HEAD)
    while len(body) < length:
        chunk = await stream.receive_some()
        if not chunk:
            return
        body += chunk


@attrs.define(eq=False)
class ModelPeer:
    """The server. ``behaviour`` answers the next connections; ``requests`` counts the
    requests read (``requested`` is set at the first); ``release`` lets the held ones
    answer; ``port`` stays across a kill."""

    api: str
    behaviour: Behaviour = Behaviour.answer
    requests: int = 0
    requested: trio.Event = attrs.Factory(trio.Event)
    release: trio.Event = attrs.Factory(trio.Event)
    port: int = 0
    _listener: trio.SocketListener | None = None
    _conns: set[trio.SocketStream] = attrs.Factory(set)
    _scope: trio.CancelScope | None = None
    _counted: trio.Event = attrs.Factory(trio.Event)  # set at each request, then new

    async def wait_requests(self, count: int) -> None:
        """Wait until ``count`` requests have been read. A checkpoint."""
        while self.requests < count:
            await self._counted.wait()
        await trio.lowlevel.checkpoint()

    @property
    def url(self) -> str:
        """The base URL the adapters are given."""
        return f"http://127.0.0.1:{self.port}"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Listen (on ``port``, or a free one) and serve until killed. A checkpoint."""
        sock = trio.socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        await sock.bind(("127.0.0.1", self.port))
        sock.listen(16)
        self.port = sock.getsockname()[1]
        self._listener = trio.SocketListener(sock)
        with trio.CancelScope() as self._scope:
            async with self._listener, trio.open_nursery() as nursery:
                task_status.started()
                while True:
                    stream = await self._listener.accept()
                    nursery.start_soon(self._serve, stream)

    async def kill(self) -> None:
        """Stop listening and reset every open connection, as a killed process would."""
        assert self._scope is not None
        self._scope.cancel()
        for stream in list(self._conns):
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                     b"\x01\x00\x00\x00\x00\x00\x00\x00")
            await stream.aclose()
        await trio.lowlevel.checkpoint()

    async def _serve(self, stream: trio.SocketStream) -> None:
        self._conns.add(stream)
        try:
            async with stream:
                await self._answer(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._conns.discard(stream)

    async def _answer(self, stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data and len(data) < MAX_HEAD:
            chunk = await stream.receive_some()
            if not chunk:
                return
            data += chunk
        await _read_body(stream, data)
        self.requests += 1
        self.requested.set()
        self._counted.set()
        self._counted = trio.Event()
        behaviour = self.behaviour
        body = reply_body(self.api, "fine")
        if behaviour is Behaviour.answer:
            await stream.send_all(HEAD + body)
        elif behaviour is Behaviour.partial_then_reset:
            await stream.send_all(HEAD + body[: len(body) // 2])
            await self.kill()
        elif behaviour is Behaviour.hang:
            await trio.sleep_forever()
        elif behaviour is Behaviour.held:
            await self.release.wait()
            await stream.send_all(HEAD + body)
        elif behaviour is Behaviour.drip:
            for byte in HEAD + body:
                await stream.send_all(bytes([byte]))
                await trio.sleep(1)
        elif behaviour is Behaviour.garbage:
            await stream.send_all(b"\x00\xffNOT HTTP AT ALL\r\n\r\n" * 4)
        elif behaviour is Behaviour.oversized:
            await stream.send_all(HEAD)
            # A comment line (ignored by SSE) without end: only a size cap stops it.
            await stream.send_all(b": ")
            while True:
                await stream.send_all(b"x" * 65536)
        # Behaviour.close: leave the block, closing the connection.
