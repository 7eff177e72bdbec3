"""W7's model server: a small, fast OpenAI-compatible chat-completions server on
127.0.0.1, run in its own process (``python -m bench._llmserver [--ports N]``).

Its replies are scripted from the request alone: a request whose messages hold a
tool result (``"role": "tool"``) gets the answer, streamed as :data:`ANSWER_CHUNKS`
content chunks; any other gets one call of the ``echo`` tool. A request for the model
``park`` gets the headers and a first chunk of a stream that never ends (the parked
runs of ``bench._parked``). ``"stream": false`` gets the same reply as one JSON body.

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

ANSWER_CHUNKS = 50
"""Content chunks of the streamed answer."""

ANSWER_TEXT = "".join(f"w{i} " for i in range(ANSWER_CHUNKS))
"""The answer's whole text: the concatenation of its chunks."""

_MAX_HEAD = 64 * 1024
_MAX_BODY = 16 * 1024 * 1024


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


def _sse(events: list[dict[str, object]]) -> bytes:
    # One HTTP chunk per server-sent event, as a streaming server flushes them.
    out = [
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
    ]
    payloads = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
    payloads.append(b"data: [DONE]\n\n")
    for payload in payloads:
        out.append(b"%x\r\n%s\r\n" % (len(payload), payload))
    out.append(b"0\r\n\r\n")
    return b"".join(out)


def _json(status: str, value: object) -> bytes:
    body = json.dumps(value).encode()
    return (b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (status.encode(), len(body), body))


def _usage_chunk() -> dict[str, object]:
    return {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
            "model": "bench", "choices": [], "usage": _USAGE}


def _completion(message: dict[str, object], finish: str) -> bytes:
    return _json("200 OK", {
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
_FIRST_EVENT = b"data: " + json.dumps(_chunk({"role": "assistant", "content": ""})).encode()
PARK_HEAD = CALL_STREAM[: CALL_STREAM.index(b"\r\n\r\n") + 4]
PARK_FIRST = b"%x\r\n%s\n\n\r\n" % (len(_FIRST_EVENT) + 2, _FIRST_EVENT)
"""A parked reply: the headers and the first chunk of a stream that never ends."""


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
        self.cpu_start = time.process_time()

    def as_json(self) -> dict[str, object]:
        return {
            "requests": self.requests, "tool_call_replies": self.calls,
            "answer_replies": self.answers, "unstreamed": self.unstreamed,
            "parked": self.parked, "connections": self.connections,
            "cpu_seconds": time.process_time() - self.cpu_start,
        }


STATS = Stats()


class Connection(asyncio.Protocol):
    """One client connection: HTTP/1.1 requests, kept alive, answered in order."""

    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.parked = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        STATS.connections += 1

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while not self.parked:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > _MAX_HEAD:
                    self._fail(b"431 Request Header Fields Too Large")
                return
            head = self.buffer[:end].lower()
            length = 0
            at = head.find(b"\r\ncontent-length:")
            if at >= 0:
                stop = head.find(b"\r\n", at + 2)
                try:
                    length = int(head[at + 17: stop if stop >= 0 else None])
                except ValueError:
                    self._fail(b"400 Bad Request")
                    return
            if length > _MAX_BODY or b"transfer-encoding: chunked" in head:
                self._fail(b"400 Bad Request")
                return
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4: end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            self._answer(head, body)

    def _answer(self, head: bytes, body: bytes) -> None:
        assert self.transport is not None
        if head.startswith(b"get /stats"):
            self.transport.write(_json("200 OK", STATS.as_json()))
            return
        if head.startswith(b"post /reset"):
            STATS.reset()
            self.transport.write(_json("200 OK", {}))
            return
        if not head.startswith(b"post ") or b"/chat/completions" not in head[:200]:
            self._fail(b"404 Not Found")
            return
        STATS.requests += 1
        compact = body.replace(b" ", b"")
        if b'"model":"park"' in compact:
            STATS.parked += 1
            self.parked = True
            self.transport.write(PARK_HEAD + PARK_FIRST)
            return
        answer = b'"role":"tool"' in compact
        streamed = b'"stream":true' in compact
        if answer:
            STATS.answers += 1
        else:
            STATS.calls += 1
        if not streamed:
            STATS.unstreamed += 1
            self.transport.write(ANSWER_JSON if answer else CALL_JSON)
        else:
            self.transport.write(ANSWER_STREAM if answer else CALL_STREAM)

    def _fail(self, status: bytes) -> None:
        assert self.transport is not None
        self.transport.write(b"HTTP/1.1 %s\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                             % status)
        self.transport.close()


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
