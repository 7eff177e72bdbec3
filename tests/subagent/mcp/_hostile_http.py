"""A hand-written streamable-HTTP MCP server on 127.0.0.1 for attack tests: it speaks
just enough of the protocol (initialize, its notification, tools/list, tools/call)
and answers ``tools/list`` or ``tools/call`` with whatever a test scripts."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

#: Writes the whole answer to one JSON-RPC request (head and body) on the stream.
Answer = Callable[[trio.SocketStream, Any], Awaitable[None]]


def head(status: int = 200, *headers: str, length: int | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} X", *headers, "Connection: close"]
    lines.append("Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def json_answer(stream: trio.SocketStream, body: bytes, *headers: str) -> None:
    await stream.send_all(
        head(200, "Content-Type: application/json", *headers, length=len(body)) + body
    )


def result(request_id: Any, value: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": value}).encode()


@attrs.define(eq=False)
class HostileMcp:
    """The server; ``answers`` maps a method to how it is answered."""

    answers: dict[str, Answer] = attrs.Factory(dict)
    methods: list[str] = attrs.Factory(list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def handle(self, stream: trio.SocketStream) -> None:
        async with stream:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self._serve(stream)

    async def _serve(self, stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            piece = await stream.receive_some()
            if not piece:
                return
            data += piece
        top, _, body = data.partition(b"\r\n\r\n")
        request_line, *lines = top.decode("latin-1").split("\r\n")
        method = request_line.split(" ", 1)[0]
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            piece = await stream.receive_some()
            if not piece:
                return
            body += piece
        if method != "POST":
            await stream.send_all(head(405, length=0))
            return
        message = json.loads(body)
        name = message.get("method", "")
        self.methods.append(name)
        if "id" not in message:
            await stream.send_all(head(202, length=0))
        elif name in self.answers:
            await self.answers[name](stream, message["id"])
        elif name == "initialize":
            version = message["params"]["protocolVersion"]
            init = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
            await json_answer(stream, result(message["id"], init))
        elif name == "ping":
            await json_answer(stream, result(message["id"], {}))
        else:
            error = {"jsonrpc": "2.0", "id": message["id"],
                     "error": {"code": -32601, "message": "no such method"}}
            await json_answer(stream, json.dumps(error).encode())


async def start(nursery: trio.Nursery, server: HostileMcp) -> HostileMcp:
    """Serve ``server`` on 127.0.0.1 for the test's duration."""
    from functools import partial

    listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
    server.port = listeners[0].socket.getsockname()[1]
    return server
