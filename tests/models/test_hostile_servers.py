"""Hostile model servers on 127.0.0.1 against the adapters' default bounds.

Each case serves one attack over a real socket (raw HTTP/1.1 written by hand) to a
client running in a child process (``_hostile_client``), which reports the error it
got and how much its peak resident memory grew. Every case must end with the
documented error, within the subprocess deadline (the child is SIGKILLed past it),
with under 300 MB of growth: without the bounds each of these grows without limit or
never ends.
"""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest
import trio

Behaviour = Callable[[trio.SocketStream], Awaitable[None]]

MB = 1000 * 1000
GROWTH_LIMIT = 300 * MB
CHILD_DEADLINE = 60.0
KEY = "sk-hostile-test-key-0123456789"


async def read_request(stream: trio.SocketStream) -> None:
    """Read one request (head and Content-Length body) off ``stream``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some()
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = await stream.receive_some()
        if not chunk:
            return
        body += chunk


def head(status: int = 200, *headers: str, chunked: bool = True) -> bytes:
    lines = [f"HTTP/1.1 {status} X", *headers, "Connection: close"]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def forever(stream: trio.SocketStream, data: bytes) -> None:
    while True:
        await stream.send_all(data)


async def huge_body(stream: trio.SocketStream) -> None:
    # A 700 MB JSON reply, announced with its length.
    await stream.send_all(
        head(200, "Content-Type: application/json", f"Content-Length: {700 * MB}", chunked=False)
    )
    await stream.send_all(b'{"choices": [{"message": {"content": "')
    await forever(stream, b"a" * 65536)


async def amplifying_json(stream: trio.SocketStream) -> None:
    # 30 MB of [{},{},...]: under max_response_bytes, but 800 MB of dicts once parsed.
    count = 10 * MB
    await stream.send_all(
        head(200, "Content-Type: application/json", f"Content-Length: {3 * count}", chunked=False)
    )
    await stream.send_all(b"[")
    for _ in range(count // 100_000 - 1):
        await stream.send_all(b"{}," * 100_000)
    await stream.send_all(b"{}," * 99_999 + b"{}]")


def gzip_bomb_blocks(megabytes: int) -> tuple[bytes, bytes, int]:
    """The first and the repeated block of a gzip stream of ``megabytes`` MiB of zeros,
    built from two 1 MiB blocks (a full flush makes every later block the same bytes),
    and the stream's compressed size."""
    zeros = bytes(1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    return first, block, len(first) + (megabytes - 1) * len(block)


async def gzip_bomb(stream: trio.SocketStream) -> None:
    # About 1.5 MB of gzip that inflates to 1.5 GiB of zeros.
    first, block, _ = gzip_bomb_blocks(1500)
    await stream.send_all(head(200, "Content-Type: application/json", "Content-Encoding: gzip"))
    await stream.send_all(chunk(first))
    for _ in range(1499):
        await stream.send_all(chunk(block))
    await stream.send_all(b"0\r\n\r\n")


def sse(payload: Any) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


async def event_stream(stream: trio.SocketStream, *events: bytes, repeat: bytes) -> None:
    await stream.send_all(head(200, "Content-Type: text/event-stream"))
    for event in events:
        await stream.send_all(chunk(event))
    await forever(stream, chunk(repeat * 64))


def text_delta(text: str) -> bytes:
    return sse({"choices": [{"index": 0, "delta": {"content": text}}]})


async def endless_text(stream: trio.SocketStream) -> None:
    await event_stream(stream, repeat=text_delta("a" * 1000))


async def endless_empty_chunks(stream: trio.SocketStream) -> None:
    # Valid chunks that add nothing: only the byte count stops them.
    await event_stream(stream, repeat=sse({"choices": []}))


async def endless_tool_calls(stream: trio.SocketStream) -> None:
    await stream.send_all(head(200, "Content-Type: text/event-stream"))
    index = 0
    while True:
        calls = [
            {"index": i, "id": f"c{i}", "function": {"name": "t"}}
            for i in range(index, index + 64)
        ]
        index += 64
        await stream.send_all(chunk(sse({"choices": [{"delta": {"tool_calls": calls}}]})))


async def endless_arguments(stream: trio.SocketStream) -> None:
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}
    partial_json = {"type": "input_json_delta", "partial_json": "[" * 1000}
    await event_stream(
        stream,
        sse({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
        sse({"type": "content_block_start", "index": 0, "content_block": tool_use}),
        repeat=sse({"type": "content_block_delta", "index": 0, "delta": partial_json}),
    )


async def endless_line(stream: trio.SocketStream) -> None:
    await event_stream(stream, b"data: ", repeat=b"a" * 1024)


async def trickle(stream: trio.SocketStream) -> None:
    # One byte every 50 ms: each read is well within read_timeout, the whole never ends.
    await stream.send_all(
        head(200, "Content-Type: application/json", "Content-Length: 100000", chunked=False)
    )
    while True:
        await stream.send_all(b" ")
        await trio.sleep(0.05)


async def trickle_events(stream: trio.SocketStream) -> None:
    await stream.send_all(head(200, "Content-Type: text/event-stream"))
    while True:
        await stream.send_all(chunk(b": keep-alive\n"))
        await trio.sleep(0.05)


HUGE_ERROR_PREFIX = b'{"error": {"type": "invalid_request_error", "message": "'


async def huge_error(stream: trio.SocketStream) -> None:
    # A 40 MB JSON error message.
    length = len(HUGE_ERROR_PREFIX) + 40 * MB + 3
    await stream.send_all(
        head(400, "Content-Type: application/json", f"Content-Length: {length}", chunked=False)
    )
    await stream.send_all(HUGE_ERROR_PREFIX)
    for _ in range(40 * MB // 100_000):
        await stream.send_all(b"x" * 100_000)
    await stream.send_all(b'"}}')


def huge_error_message() -> str:
    text = (HUGE_ERROR_PREFIX + b"x" * 4096).decode()
    return f"OpenAI API error (HTTP 400): {text[:4096]}..."


CASES: list[tuple[str, str, bool, Behaviour, dict[str, Any], str, str]] = [
    (
        "huge body",
        "openai",
        False,
        huge_body,
        {},
        "ModelError",
        "OpenAI reply is larger than max_response_bytes (33554432 bytes)",
    ),
    (
        "JSON amplification",
        "openai",
        False,
        amplifying_json,
        {},
        "ModelError",
        "OpenAI reply has more JSON values than max_json_values (1048576)",
    ),
    (
        "gzip bomb",
        "openai",
        False,
        gzip_bomb,
        {},
        "ModelError",
        "OpenAI reply is larger than max_response_bytes (33554432 bytes)",
    ),
    (
        "endless text deltas",
        "openai",
        True,
        endless_text,
        {},
        "ModelError",
        "OpenAI reply's text is longer than max_text_chars (8388608 characters)",
    ),
    (
        "endless empty chunks",
        "openai",
        True,
        endless_empty_chunks,
        {"max_response_bytes": 1_000_000},
        "ModelError",
        "OpenAI reply is larger than max_response_bytes (1000000 bytes)",
    ),
    (
        "endless tool calls",
        "openai",
        True,
        endless_tool_calls,
        {},
        "ModelError",
        "OpenAI reply has more tool calls than max_tool_calls (256)",
    ),
    (
        "endless tool arguments",
        "anthropic",
        True,
        endless_arguments,
        {},
        "ModelError",
        "Anthropic reply's tool arguments are longer than max_arguments_chars "
        "(8388608 characters)",
    ),
    (
        "endless line",
        "openai",
        True,
        endless_line,
        {},
        "ModelError",
        "OpenAI stream has an event line or event longer than max_event_chars "
        "(1048576 characters)",
    ),
    (
        "trickled body",
        "openai",
        False,
        trickle,
        {"read_timeout": 0.25, "total_timeout": 0.5},
        "TransientModelError",
        "OpenAI call took longer than total_timeout (0.5 s)",
    ),
    (
        "trickled stream",
        "anthropic",
        True,
        trickle_events,
        {"read_timeout": 0.25, "total_timeout": 0.5},
        "TransientModelError",
        "Anthropic call took longer than total_timeout (0.5 s)",
    ),
    (
        "40 MB error message",
        "openai",
        False,
        huge_error,
        {},
        "ModelError",
        huge_error_message(),
    ),
]


async def serve(behaviour: Behaviour, stream: trio.SocketStream) -> None:
    async with stream:
        try:
            await read_request(stream)
            await behaviour(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client gave up, as it should


async def kill(process: trio.Process) -> None:
    process.kill()  # SIGKILL


def test_gzip_bomb_is_small_and_inflates_to_1_5_gib() -> None:
    first, block, size = gzip_bomb_blocks(1500)
    assert size < 1.6 * MB
    inflated = zlib.decompressobj(31).decompress(first + block * 3)
    assert inflated == bytes(4 << 20)


@pytest.mark.slow
async def test_hostile_servers_are_bounded(nursery: trio.Nursery) -> None:
    specs = []
    for _, api, stream, behaviour, kwargs, _, _ in CASES:
        listeners = await nursery.start(
            partial(trio.serve_tcp, partial(serve, behaviour), 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        specs.append(
            {
                "api": api,
                "key": KEY,
                "base_url": f"http://127.0.0.1:{port}",
                "stream": stream,
                "kwargs": kwargs,
            }
        )
    # One child makes every call in turn (one interpreter start-up in CI, not ten).
    with trio.fail_after(CHILD_DEADLINE):
        done = await trio.run_process(
            [sys.executable, "-m", "tests.models._hostile_client", json.dumps(specs)],
            capture_stdout=True,
            deliver_cancel=kill,
        )
    reports = json.loads(done.stdout)
    errors = {case[0]: report["error"] for case, report in zip(CASES, reports, strict=True)}
    assert errors == {name: {"type": kind, "message": text} for name, *_, kind, text in CASES}
    growth = {case[0]: report["growth"] for case, report in zip(CASES, reports, strict=True)}
    assert all(0 <= n < GROWTH_LIMIT for n in growth.values()), growth
