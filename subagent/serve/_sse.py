"""The event stream endpoint: the pool's events as Server-Sent Events, each with
its id (``<epoch>-<n>``), resumable with ``Last-Event-ID``.

Each stream reads the hub's log at its own pace; the pool never waits on it. Events
it fell too far behind for (or that the log no longer held when it resumed) are
said in an ``event: dropped`` message (``{"missed": n, "dropped": total}``) and
counted for that stream only.
"""

from __future__ import annotations

import msgspec
import trio

from agentcore import AgentPath

from ._http import COMMON_HEADERS, Receive, Scope, Send, header
from ._hub import Hub

#: The most events one write to a stream carries.
BATCH = 256
#: Seconds without an event after which a stream gets a comment line (keeps proxies
#: and the client's reader from timing it out).
KEEPALIVE = 15.0


def start_after(last_event_id: str | None, epoch: str) -> int | None:
    """The event number a stream resumes after: the number of ``Last-Event-ID`` when
    it is this server's (same epoch), else ``None`` (from the oldest event held)."""
    if not last_event_id:
        return None
    found_epoch, _, number = last_event_id.strip().partition("-")
    if found_epoch != epoch or not number.isdigit() or len(number) > 18:
        return None
    return int(number)


async def stream_events(hub: Hub, epoch: str, scope: Scope, receive: Receive, send: Send,
                        prefix: AgentPath) -> None:
    """Answer with the events of the runs at and under ``prefix`` (``()``: every
    event) until the client goes away or the server stops. A checkpoint."""
    resume = start_after(header(scope, b"last-event-id"), epoch)
    log = hub.log
    # A new stream starts at the oldest event held; what came before is no drop of its own.
    cursor = resume if resume is not None else max(0, log.last_id - log.held)
    number, reader = hub.open_reader()  # before the answer starts: a refusal is a 503
    try:
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"), *COMMON_HEADERS]})
        await send({"type": "http.response.body", "body": b"retry: 1000\n\n",
                    "more_body": True})
        ended = False
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_until_disconnect, receive, nursery.cancel_scope)
            while True:
                batch, missed = log.since(cursor, BATCH)
                chunks: list[bytes] = []
                if missed:
                    reader.dropped += missed
                    chunks.append(b"event: dropped\ndata: " + msgspec.json.encode(
                        {"missed": missed, "dropped": reader.dropped}) + b"\n\n")
                for entry in batch:
                    cursor = entry.id
                    if entry.path[: len(prefix)] != prefix:
                        continue
                    chunks.append(b"id: %s-%d\nevent: event\ndata: %s\n\n"
                                  % (epoch.encode(), entry.id, entry.data))
                    reader.sent += 1
                if chunks:
                    await send({"type": "http.response.body", "body": b"".join(chunks),
                                "more_body": True})
                elif batch:
                    continue
                elif log.closed:
                    ended = True
                    break
                else:
                    with trio.move_on_after(KEEPALIVE) as idle:
                        await log.wait_after(cursor)
                    if idle.cancelled_caught:
                        await send({"type": "http.response.body", "body": b": keepalive\n\n",
                                    "more_body": True})
            nursery.cancel_scope.cancel()
        if ended:  # the server stops: the stream ends cleanly
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        hub.close_reader(number)


async def _until_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    # Ends the stream when the client goes away.
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
