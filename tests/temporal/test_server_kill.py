"""The dev server SIGKILLed and restarted on its SQLite file loses nothing."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from temporalio.client import Client

import ledger
from subagent import EventKind
from subagent.temporal import DevServer, RootResult, Worker, events, ledger_name, start

from .trees import Blocker, chain, echo_specs


async def across_kill(db: Path, folder: Path, servers: list[DevServer]) -> None:
    servers.append(DevServer(db=db).start())
    port = servers[0].port
    client = await Client.connect(servers[0].address)
    # Started before the kill, with no worker yet: only the server knows of it.
    waiting = await start(client, "echo", "later", task_queue="kill-echo", id="kill-echo")
    blocker, gate = Blocker(), threading.Event()
    async with Worker(client, "kill", specs=lambda: chain(blocker, gate), ledger_dir=folder):
        running = await start(client, "top", "go", task_queue="kill", id="kill-chain")
        await asyncio.to_thread(blocker.started.wait, 30)
        servers[0].kill()
        servers.append(DevServer(port=port, db=db).start())
        gate.set()  # the in-flight activity finishes against the restarted server
        result = await running.result()
        seen = [event async for event in events(client, "kill-chain")]
    assert result == RootResult("finished", result.output, None, 60, 12, 42,
                                ledger_name("kill-chain"))
    assert result.output.startswith("top: ")
    assert "bottom: opened" in result.output
    assert len(seen) == 42
    assert sum(e.kind == EventKind.task_finished for e in seen) == 3
    async with Worker(client, "kill-echo", specs=echo_specs()):
        assert (await waiting.result()).output == "echo: later"


@pytest.mark.slow
def test_server_sigkill_and_restart_loses_nothing(tmp_path: Path) -> None:
    servers: list[DevServer] = []
    try:
        asyncio.run(across_kill(tmp_path / "temporal.sqlite", tmp_path / "ledgers", servers))
    finally:
        for server in servers:
            server.kill()
    assert ledger.verify(tmp_path / "ledgers" / ledger_name("kill-chain")).ok
