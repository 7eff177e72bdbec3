"""W7's model server: a small, fast OpenAI-compatible chat-completions server on
127.0.0.1, run in its own process (``python -m bench._llmserver [--ports N]``).

Its replies are scripted from the request alone: a request whose messages hold a
tool result (``"role": "tool"``) gets the answer, streamed as :data:`ANSWER_CHUNKS`
content chunks; any other gets one call of the ``echo`` tool. A request for the model
``park`` gets the headers and a first chunk of a stream that never ends (the parked
runs of ``bench._parked``). ``"stream": false`` gets the same reply as one JSON body.
Every port speaks HTTP/1.1 and, to a client that opens with the HTTP/2 preface (h2c
with prior knowledge, as ``httpx.AsyncClient(http1=False, http2=True)`` does over
``http://``), HTTP/2 through the ``h2`` library, the same replies on many streams.

It is asyncio with raw ``Protocol`` objects and replies built once at start, so
that it costs the framework under test as little CPU as possible; it counts its own
CPU time (``time.process_time``) so that a benchmark can subtract the server's part.
``GET /stats`` gives its counters as JSON; ``POST /reset`` zeroes them. It prints
``ports P1 P2 ...`` on its first line of output once listening, and stops on SIGTERM
or when its standard input closes. A benchmark helper, not part of the library.
"""

from __future__ import annotations

import asyncio
import json
import resource
import signal
import sys
import time

import attrs

ANSWER_CHUNKS = 50
"""Content chunks of the streamed answer."""

ANSWER_TEXT = "".join(f"w{i} " for i in range(ANSWER_CHUNKS))
"""The answer's whole text: the concatenation of its chunks."""

_MAX_HEAD = 64 * 1024
_MAX_BODY = 16 * 1024 * 1024
_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found",
            431: b"Request Header Fields Too Large"}


def _chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
        "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
_CALL = {
    "index": 0, "id": "call_1", "type": "function",
    "function": {"name": "echo", "arguments": '{"x": 1}'},
}


@attrs.frozen
class Reply:
    """A scripted reply, whatever the protocol that carries it.

    ``parts`` are the body's pieces, each flushed on its own (one server-sent event,
    or the whole JSON body); a reply that does not ``end`` is parked after its parts:
    its stream stays open and nothing more is sent."""

    status: int
    content_type: bytes
    parts: tuple[bytes, ...]
    ends: bool = True

    def http1(self) -> bytes:
        """The reply as HTTP/1.1 bytes: chunked (one chunk a part) when it is an
        event stream, with a ``content-length`` otherwise."""
        head = b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\n" % (
            self.status, _REASONS[self.status], self.content_type)
        if self.content_type != b"text/event-stream":
            body = b"".join(self.parts)
            return head + b"content-length: %d\r\n\r\n%s" % (len(body), body)
        out = [head + b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"]
        out += [b"%x\r\n%s\r\n" % (len(part), part) for part in self.parts]
        if self.ends:
            out.append(b"0\r\n\r\n")
        return b"".join(out)


def _event(value: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(value).encode() + b"\n\n"


def _sse(events: list[dict[str, object]]) -> Reply:
    # One part (an HTTP/1.1 chunk, an HTTP/2 DATA frame) per event, as a streaming
    # server flushes them.
    parts = (*(_event(e) for e in events), b"data: [DONE]\n\n")
    return Reply(200, b"text/event-stream", parts)


def _json(value: object, status: int = 200) -> Reply:
    return Reply(status, b"application/json", (json.dumps(value).encode(),))


def _usage_chunk() -> dict[str, object]:
    return {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
            "model": "bench", "choices": [], "usage": _USAGE}


def _completion(message: dict[str, object], finish: str) -> Reply:
    return _json({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _USAGE,
    })


CALL_STREAM = _sse([
    _chunk({"role": "assistant", "content": None, "tool_calls": [_CALL]}),
    _chunk({}, "tool_calls"), _usage_chunk(),
])
ANSWER_STREAM = _sse([
    _chunk({"role": "assistant", "content": ""}),
    *(_chunk({"content": f"w{i} "}) for i in range(ANSWER_CHUNKS)),
    _chunk({}, "stop"), _usage_chunk(),
])
CALL_JSON = _completion(
    {"role": "assistant", "content": None, "tool_calls": [
        {k: v for k, v in _CALL.items() if k != "index"}]}, "tool_calls")
ANSWER_JSON = _completion({"role": "assistant", "content": ANSWER_TEXT}, "stop")
PARK = Reply(200, b"text/event-stream",
             (_event(_chunk({"role": "assistant", "content": ""})),), ends=False)
"""A parked reply: the headers and the first event of a stream that never ends."""

_HTTP1 = {id(r): r.http1() for r in (CALL_STREAM, ANSWER_STREAM, CALL_JSON, ANSWER_JSON, PARK)}


class Stats:
    """The server's counters since start or the last reset."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.calls = 0
        self.answers = 0
        self.unstreamed = 0
        self.parked = 0
        self.connections = 0
        self.http2_connections = 0
        self.cpu_start = time.process_time()

    def as_json(self) -> dict[str, object]:
        return {
            "requests": self.requests, "tool_call_replies": self.calls,
            "answer_replies": self.answers, "unstreamed": self.unstreamed,
            "parked": self.parked, "connections": self.connections,
            "http2_connections": self.http2_connections,
            "cpu_seconds": time.process_time() - self.cpu_start,
        }


STATS = Stats()


def route(method: bytes, path: bytes, body: bytes) -> Reply:
    """The reply to one request (``method`` and ``path`` as sent), counted in
    :data:`STATS`."""
    method = method.upper()
    if method == b"GET" and path.startswith(b"/stats"):
        return _json(STATS.as_json())
    if method == b"POST" and path.startswith(b"/reset"):
        STATS.reset()
        return _json({})
    if method != b"POST" or b"/chat/completions" not in path:
        return _json({"error": "not found"}, 404)
    STATS.requests += 1
    compact = body.replace(b" ", b"")
    if b'"model":"park"' in compact:
        STATS.parked += 1
        return PARK
    answer = b'"role":"tool"' in compact
    if answer:
        STATS.answers += 1
    else:
        STATS.calls += 1
    if b'"stream":true' not in compact:
        STATS.unstreamed += 1
        return ANSWER_JSON if answer else CALL_JSON
    return ANSWER_STREAM if answer else CALL_STREAM


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""What an HTTP/2 client with prior knowledge (h2c) sends first."""


class Connection(asyncio.Protocol):
    """One client connection: HTTP/1.1 requests, kept alive, answered in order; or,
    when it opens with :data:`H2_PREFACE`, HTTP/2 (:class:`H2Session`)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.parked = False
        self.h2: H2Session | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        STATS.connections += 1

    def data_received(self, data: bytes) -> None:
        if self.h2 is not None:
            self.h2.receive(data)
            return
        self.buffer += data
        if H2_PREFACE.startswith(self.buffer[: len(H2_PREFACE)]):
            if len(self.buffer) >= len(H2_PREFACE):
                assert self.transport is not None
                self.h2 = H2Session(self.transport)
                self.buffer, data = b"", self.buffer
                self.h2.receive(data)
            return
        while not self.parked:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > _MAX_HEAD:
                    self._fail(431)
                return
            head = self.buffer[:end].lower()
            length = 0
            at = head.find(b"\r\ncontent-length:")
            if at >= 0:
                stop = head.find(b"\r\n", at + 2)
                try:
                    length = int(head[at + 17: stop if stop >= 0 else None])
                except ValueError:
                    self._fail(400)
                    return
            if length > _MAX_BODY or b"transfer-encoding: chunked" in head:
                self._fail(400)
                return
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4: end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            method, _, rest = head.partition(b" ")
            reply = route(method, rest.partition(b" ")[0], body)
            assert self.transport is not None
            self.transport.write(_HTTP1.get(id(reply)) or reply.http1())
            self.parked = not reply.ends

    def _fail(self, status: int) -> None:
        assert self.transport is not None
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                             % (status, _REASONS[status]))
        self.transport.close()


class H2Session:
    """One HTTP/2 connection with prior knowledge (h2c), on the ``h2`` library: up to
    ``h2``'s default of 100 concurrent streams (httpcore's own cap too), each request
    answered by :func:`route` once its body has ended; a parked reply keeps its stream
    open. Imported only when a client speaks HTTP/2, so HTTP/1.1 needs no ``h2``."""

    def __init__(self, transport: asyncio.Transport) -> None:
        import h2.config
        import h2.connection

        self.transport = transport
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding=None))
        self.h2.initiate_connection()
        STATS.http2_connections += 1
        self.requests: dict[int, tuple[bytes, bytes, list[bytes]]] = {}

    def receive(self, data: bytes) -> None:
        import h2.events
        import h2.exceptions

        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.transport.write(self.h2.data_to_send())
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                headers = dict(event.headers or ())
                self.requests[event.stream_id] = (
                    headers.get(b":method", b""), headers.get(b":path", b""), [])
            elif isinstance(event, h2.events.DataReceived):
                self.h2.acknowledge_received_data(event.flow_controlled_length,
                                                  event.stream_id)
                parts = self.requests[event.stream_id][2]
                parts.append(event.data or b"")
                if sum(map(len, parts)) > _MAX_BODY:
                    del self.requests[event.stream_id]
                    self.h2.reset_stream(event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                request = self.requests.pop(event.stream_id, None)
                if request is not None:
                    method, path, parts = request
                    self._send(event.stream_id, route(method, path, b"".join(parts)))
            elif isinstance(event, h2.events.StreamReset):
                self.requests.pop(event.stream_id, None)
        self.transport.write(self.h2.data_to_send())

    def _send(self, stream_id: int, reply: Reply) -> None:
        # Replies are a few KiB, within the client's first flow-control window.
        self.h2.send_headers(stream_id, [
            (b":status", b"%d" % reply.status), (b"content-type", reply.content_type),
        ])
        for part in reply.parts:
            self.h2.send_data(stream_id, part)
        if reply.ends:
            self.h2.end_stream(stream_id)


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's open-file limit to ``wanted`` if it is lower: the soft
    limit up to the hard one, and past the hard one (up to the kernel's
    ``nr_open``) where the process may (root). Returns the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, max(wanted, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


async def serve(ports: int) -> None:
    loop = asyncio.get_running_loop()
    servers = [
        await loop.create_server(Connection, "127.0.0.1", 0, backlog=4096)
        for _ in range(ports)
    ]
    bound = [s.sockets[0].getsockname()[1] for s in servers]
    print("ports " + " ".join(map(str, bound)), flush=True)
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    await loop.connect_read_pipe(lambda: _Stdin(done), sys.stdin)
    await done.wait()
    for server in servers:
        server.close()


class _Stdin(asyncio.Protocol):
    # The parent holds our standard input: when it dies, so do we.
    def __init__(self, done: asyncio.Event) -> None:
        self.done = done

    def connection_lost(self, exc: Exception | None) -> None:
        self.done.set()


def main() -> None:
    args = sys.argv[1:]
    ports = int(args[args.index("--ports") + 1]) if "--ports" in args else 1
    if "--fds" in args:
        raise_fd_limit(int(args[args.index("--fds") + 1]))
    asyncio.run(serve(ports))


if __name__ == "__main__":
    main()
