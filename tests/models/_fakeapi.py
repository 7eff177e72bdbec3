"""A tiny HTTP/1.1 server on trio that answers each request with the next scripted reply.

The adapters talk to it over a real socket on 127.0.0.1, so the tests exercise httpx,
h11 and the adapters' wire formats end to end.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Sequence
from http import HTTPStatus
from typing import Any

import attrs
import trio


@attrs.frozen
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: Any  # parsed JSON


@attrs.frozen
class Reply:
    """What to answer one request with.

    Attributes:
      status: The HTTP status.
      headers: Extra headers.
      body: The body, sent with Content-Length (when ``chunks`` is None).
      chunks: Sent with chunked encoding, one chunk each, when given.
      drop: Close the connection after ``chunks`` without ending the body.
      hang: Never answer.
      hold: Keep the connection open after ``chunks`` without ending the body.
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    chunks: tuple[bytes, ...] | None = None
    drop: bool = False
    hang: bool = False
    hold: bool = False
    content_type: str = "application/json"


def json_reply(payload: Any, status: int = 200, headers: Iterable[tuple[str, str]] = ()) -> Reply:
    """A JSON reply."""
    return Reply(status, tuple(headers), json.dumps(payload).encode())


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is a string."""
    text = data if isinstance(data, str) else json.dumps(data)
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {text}\n\n".encode()


def sse_reply(events: Sequence[bytes], *, drop: bool = False) -> Reply:
    """A streamed reply: each event in its own chunk."""
    return Reply(chunks=tuple(events), drop=drop, content_type="text/event-stream")


@attrs.define(eq=False)
class FakeAPI:
    """The server: ``replies`` are consumed in order; ``requests`` records what came in."""

    replies: list[Reply] = attrs.Factory(list)
    requests: list[Recorded] = attrs.Factory(list)
    port: int = 0

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, stream: trio.SocketStream) -> None:
        """Serve one request on ``stream``, then close it."""
        async with stream:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self._serve(stream)

    async def _serve(self, stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some()
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = await stream.receive_some()
            if not chunk:
                return
            body += chunk
        self.requests.append(Recorded(method, path, headers, json.loads(body) if body else None))
        reply = self.replies.pop(0)
        if reply.hang:
            await trio.sleep_forever()
        try:
            reason = HTTPStatus(reply.status).phrase
        except ValueError:  # 529, Anthropic's "overloaded"
            reason = "Overloaded"
        lines = [f"HTTP/1.1 {reply.status} {reason}", f"Content-Type: {reply.content_type}"]
        lines += [f"{k}: {v}" for k, v in reply.headers]
        lines.append("Connection: close")
        if reply.chunks is None:
            lines.append(f"Content-Length: {len(reply.body)}")
            await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + reply.body)
            return
        lines.append("Transfer-Encoding: chunked")
        await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode())
        for chunk in reply.chunks:
            await stream.send_all(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        if reply.hold:
            await trio.sleep_forever()
        if not reply.drop:
            await stream.send_all(b"0\r\n\r\n")
