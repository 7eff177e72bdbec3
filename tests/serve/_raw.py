"""A raw HTTP/1.1 client over a trio socket (h11), for what httpx's streaming leaves
half-closed when dropped early: an SSE reader that can hang up mid-stream, and a
chunked body the server refuses before it ends."""

from __future__ import annotations

import json
from typing import Any

import h11
import trio

from ._served import TOKEN


async def connect(url: str) -> tuple[trio.SocketStream, h11.Connection, str]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return await trio.open_tcp_stream(host, int(port)), h11.Connection(h11.CLIENT), host


async def _next(stream: trio.SocketStream, conn: h11.Connection) -> Any:
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
            continue
        return event


async def read_events(url: str, *, limit: int, last_id: str | None = None,
                      path: str = "/api/events") -> list[tuple[str, str, dict[str, Any]]]:
    """The first ``limit`` messages of the event stream (id, event, data); then hang up."""
    stream, conn, host = await connect(url)
    headers = [("Host", host), ("Authorization", f"Bearer {TOKEN}")]
    if last_id is not None:
        headers.append(("Last-Event-ID", last_id))
    await stream.send_all(conn.send(h11.Request(method="GET", target=path, headers=headers)))
    await stream.send_all(conn.send(h11.EndOfMessage()))
    got: list[tuple[str, str, dict[str, Any]]] = []
    buffer = b""
    with trio.fail_after(10):
        response = await _next(stream, conn)
        assert isinstance(response, h11.Response) and response.status_code == 200
        while len(got) < limit:
            event = await _next(stream, conn)
            assert isinstance(event, h11.Data), event
            buffer += bytes(event.data)
            while b"\n\n" in buffer and len(got) < limit:
                block, buffer = buffer.split(b"\n\n", 1)
                fields = dict(line.split(": ", 1) for line in block.decode().split("\n")
                              if not line.startswith(":"))
                if "data" in fields:
                    got.append((fields.get("id", ""), fields.get("event", ""),
                                json.loads(fields["data"])))
    await stream.aclose()
    return got


async def post_big(url: str, path: str, chunks: int, size: int, *,
                   declared: bool = False) -> tuple[int, bytes]:
    """POST a JSON body of ``chunks`` chunks of ``size`` bytes (chunked, or with its
    Content-Length when ``declared``), stopping at the server's answer; returns its
    status and body."""
    stream, conn, host = await connect(url)
    length = (("Content-Length", str(chunks * size)) if declared
              else ("Transfer-Encoding", "chunked"))
    await stream.send_all(conn.send(h11.Request(method="POST", target=path, headers=[
        ("Host", host), ("Authorization", f"Bearer {TOKEN}"),
        ("Content-Type", "application/json"), length])))
    answer: list[Any] = []

    async def read() -> None:
        answer.append(await _next(stream, conn))
        body = b""
        while not isinstance(event := await _next(stream, conn), h11.EndOfMessage):
            body += bytes(event.data)
        answer.append(body)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            try:
                for _ in range(chunks):
                    await stream.send_all(conn.send(h11.Data(data=b"x" * size)))
            except trio.BrokenResourceError:  # the server answered and hung up
                pass
    await stream.aclose()
    return answer[0].status_code, answer[1]
