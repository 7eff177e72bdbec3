"""A worker SIGKILLed mid-run: a second worker takes the activity over.

Until issue 20 (``RunState``) fills :mod:`subagent.temporal._resume`, the retried
attempt starts the tree over (so the default is one attempt; this test asks for two
and uses read-only tools only). What is real today and shown here: the heartbeat of
the killed attempt reaches the next one (its turn count), which records an
``attempt_resumed`` entry on the same ledger chain, and the run finishes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from temporalio.client import Client

import ledger
from subagent.temporal import DevServer, RunOptions, Worker, ledger_name, start

from .worker_proc import once_specs

ROOT = Path(__file__).resolve().parents[2]


async def kill_and_take_over(server: DevServer, tmp_path: Path) -> str:
    marker, ledgers = tmp_path / "started", tmp_path / "ledgers"
    first = subprocess.Popen(
        [sys.executable, "-m", "tests.temporal.worker_proc", server.address, "killq",
         str(ledgers), str(marker)], cwd=ROOT, stdin=subprocess.DEVNULL,
    )
    try:
        client = await Client.connect(server.address)
        handle = await start(client, "top", "go", task_queue="killq", id="kill-worker",
                             options=RunOptions(heartbeat_timeout=2.0, max_attempts=2))
        for _ in range(600):
            if marker.exists():
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # a heartbeat after the last turn boundary reaches the server
        first.kill()
        first.wait()
        async with Worker(client, "killq", specs=lambda: once_specs(marker), ledger_dir=ledgers):
            result = await handle.result()
        assert result.status == "finished"
        return result.output
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def test_a_second_worker_takes_over_a_killed_attempt(dev_server: DevServer,
                                                     tmp_path: Path) -> None:
    output = asyncio.run(kill_and_take_over(dev_server, tmp_path))
    assert "bottom: second time" in output
    path = tmp_path / "ledgers" / ledger_name("kill-worker")
    assert ledger.verify(path).ok
    resumed = [json.loads(line) for line in path.read_text().splitlines()
               if json.loads(line)["kind"] == "attempt_resumed"]
    assert len(resumed) == 1
    assert resumed[0]["data"] == {"workflow_id": "kill-worker", "attempt": 2, "from_turns": 3,
                                  "resumed_state": False}
