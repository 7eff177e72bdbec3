"""A streamed call cancelled while its request body is being sent (Ctrl-C on a long
conversation) leaves nothing for the interpreter to finalize after ``trio.run``: httpx
wrapped a body given as ``content`` in an async generator, which the cancel left
unfinished, and its finalizer printed "Exception ignored ... RunFinishedError" on
stderr once the run had returned (tests/subagent/test_cli_signals.py, under load)."""

from __future__ import annotations

import gc
import socket
import sys
from typing import Any

import trio
import trio.testing

from agentcore import Message, ModelRequest
from agentcore.models import OpenAIChatModel


async def _ignore(delta: str) -> None:
    pass


def test_a_call_cancelled_mid_send_leaves_no_generator_to_finalize() -> None:
    unraisable: list[Any] = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    # A server that accepts and never reads: the 8 MB body fills the socket buffers.
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        request = ModelRequest((Message("user", "x" * 8_000_000),))

        async def main() -> None:
            model = OpenAIChatModel("m", api_key="k", base_url=f"http://127.0.0.1:{port}")
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(model.stream, request, _ignore)
                    await trio.testing.wait_all_tasks_blocked(0.2)
                    scope.cancel()

        try:
            trio.run(main)
            gc.collect()
        finally:
            sys.unraisablehook = hook
    assert unraisable == []
