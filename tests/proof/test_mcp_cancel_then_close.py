"""A client of ``subagent mcp`` that cancels its calls and then closes stdin (a user
quitting it: the SDK sends ``notifications/cancelled`` for each call in flight, then
the process ends). Each call was cancelled by the client: its run's ``abort`` entry
says ``caller``, whatever the order in which the server's tasks see the cancels and
the end of stdin (the end of stdin alone says ``pool_closed``: the matrix's
``closes_early`` cell)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from .peer_models import Behaviour, ModelPeer
from .test_matrix_client import ABORT, INITIALIZE, Client, Seen, call, line

CALLS = tuple(range(2, 18, 2))
DEADLINE = 60.0


async def cancel_then_close(tmp: Path) -> list[tuple[str, str | None]]:
    peer = ModelPeer("openai", behaviour=Behaviour.hang)
    async with trio.open_nursery() as nursery:
        await nursery.start(peer.run)
        (tmp / "specs.toml").write_text(
            '[agents.slow]\ndescription = "Never answers."\nmodel = "openai:gpt-test"\n')
        env = {**os.environ, "OPENAI_BASE_URL": peer.url, "OPENAI_API_KEY": "sk-test-0000"}
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "subagent", "mcp", str(tmp / "specs.toml"),
             "--ledger", str(tmp / "ledger.jsonl")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=tmp, env=env)
        client = Client(process, Seen())
        assert process.stdin is not None
        with trio.fail_after(DEADLINE):
            await client.send(INITIALIZE)
            await client.until(1)
            await client.send(b"".join(call(id, "slow", progress=id == 2) for id in CALLS))
            await peer.wait_requests(len(CALLS))  # each call's run is in its model call
            # One write: every cancel, then the end of stdin at once.
            await client.send(b"".join(line({
                "jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "the user quit"}}) for id in CALLS))
            await process.stdin.aclose()
            await client.until_end()
            assert await process.wait() == 0
        nursery.cancel_scope.cancel()
    entries = [json.loads(text) for text in (tmp / "ledger.jsonl").read_text().splitlines()]
    return [("/".join(e["path"]), e["error"]) for e in entries if e["kind"] == "abort"]


@pytest.mark.slow
async def test_calls_the_client_cancelled_before_it_closed_stdin_say_caller(
    tmp_path: Path,
) -> None:
    aborts = await cancel_then_close(tmp_path)
    assert sorted(aborts) == [(f"slow/{n:04d}", ABORT["hangs"]) for n in range(1, len(CALLS) + 1)]
