"""Attacks on the decoded-body bound through Content-Encoding (a real socket on
127.0.0.1, the client in a child process whose peak memory is watched)."""

from __future__ import annotations

import json
import sys
import zlib
from functools import partial
from typing import Any

import trio

from tests.models.test_hostile_servers import (
    CHILD_DEADLINE,
    GROWTH_LIMIT,
    KEY,
    MB,
    chunk,
    gzip_bomb_blocks,
    head,
    kill,
    serve,
)


def double_gzip_bomb() -> bytes:
    """A gzip stream (about 1 MB) of a gzip stream of 1 GiB of zeros, gzipped again:
    a few KB that one read inflates to the inner stream, and the inner decoder then
    inflates in a single call."""
    first, block, _ = gzip_bomb_blocks(1024)
    outer = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [outer.compress(first)]
    parts += [outer.compress(block) for _ in range(1023)]
    parts.append(outer.flush())
    return b"".join(parts)


async def stacked_gzip(stream: trio.SocketStream) -> None:
    body = double_gzip_bomb()
    await stream.send_all(
        head(200, "Content-Type: application/json", "Content-Encoding: gzip, gzip")
    )
    await stream.send_all(chunk(body))
    await stream.send_all(b"0\r\n\r\n")


def test_the_stacked_bomb_is_small() -> None:
    assert len(double_gzip_bomb()) < 100_000


async def test_a_stacked_content_encoding_is_refused_before_it_inflates(
    nursery: trio.Nursery,
) -> None:
    listeners = await nursery.start(
        partial(trio.serve_tcp, partial(serve, stacked_gzip), 0, host="127.0.0.1")
    )
    port = listeners[0].socket.getsockname()[1]
    specs: list[dict[str, Any]] = [{"api": "openai", "key": KEY, "base_url": f"http://127.0.0.1:{port}",
              "stream": stream, "kwargs": {}} for stream in (False, True)]
    with trio.fail_after(CHILD_DEADLINE):
        done = await trio.run_process(
            [sys.executable, "-m", "tests.models._hostile_client", json.dumps(specs)],
            capture_stdout=True,
            deliver_cancel=kill,
        )
    reports = json.loads(done.stdout)
    growth = [report["growth"] for report in reports]
    assert all(0 <= n < GROWTH_LIMIT for n in growth), [n / MB for n in growth]
    assert [report["error"] for report in reports] == [
        {"type": "ModelError",
         "message": "OpenAI reply has a Content-Encoding of more than one layer ('gzip, gzip')"},
    ] * 2
