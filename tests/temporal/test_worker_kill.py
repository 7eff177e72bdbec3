"""A worker SIGKILLed mid-run: a second worker takes the activity over.

The retried attempt resumes the tree from the last heartbeat (its checkpoints); the
call in flight at the kill is read-only, so it runs again (the second time it
answers). The heartbeat of the killed attempt reaches the next one (its turn count),
which records an ``attempt_resumed`` entry on the same ledger chain, and the run
finishes. (Mutating calls: see test_worker_resume.py.)
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle

import ledger
from subagent.temporal import (
    DevServer,
    RootResult,
    RunOptions,
    Worker,
    ledger_name,
    start,
)
from subagent.temporal._resume import last_heartbeat

from .worker_proc import once_specs

ROOT = Path(__file__).resolve().parents[2]


async def last_turns(client: Client, handle: WorkflowHandle[object, RootResult]) -> int:
    """The turn count of the running attempt's last heartbeat the server has (-1: none)."""
    pending = (await handle.describe()).raw_description.pending_activities
    if not pending or not pending[0].heartbeat_details.payloads:
        return -1
    details = await client.data_converter.decode(pending[0].heartbeat_details.payloads)
    beat = last_heartbeat(details)
    return -1 if beat is None else beat.turns


async def kill_and_take_over(server: DevServer, tmp_path: Path,
                             first: subprocess.Popen[bytes]) -> str:
    marker, ledgers = tmp_path / "started", tmp_path / "ledgers"
    client = await Client.connect(server.address)
    handle = await start(client, "top", "go", task_queue="killq", id="kill-worker",
                         options=RunOptions(heartbeat_timeout=2.0, max_attempts=2))
    async with asyncio.timeout(60):
        # Wait until the server holds a heartbeat sent after the third turn boundary
        # (top, middle, bottom each started a turn; bottom is blocked in its tool).
        while await last_turns(client, handle) < 3:  # noqa: ASYNC110 (server state: polled)
            await asyncio.sleep(0.05)
    first.kill()
    first.wait()
    async with Worker(client, "killq", specs=lambda: once_specs(marker), ledger_dir=ledgers):
        result = await handle.result()
    assert result.status == "finished"
    return result.output


@pytest.mark.slow
def test_a_second_worker_takes_over_a_killed_attempt(dev_server: DevServer,
                                                     tmp_path: Path) -> None:
    first = subprocess.Popen(
        [sys.executable, "-m", "tests.temporal.worker_proc", dev_server.address, "killq",
         str(tmp_path / "ledgers"), str(tmp_path / "started")], cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    try:
        output = asyncio.run(kill_and_take_over(dev_server, tmp_path, first))
    finally:
        first.kill()
        first.wait()
    assert "bottom: second time" in output
    path = tmp_path / "ledgers" / ledger_name("kill-worker")
    assert ledger.verify(path).ok
    resumed = [json.loads(line) for line in path.read_text().splitlines()
               if json.loads(line)["kind"] == "attempt_resumed"]
    assert len(resumed) == 1
    assert resumed[0]["data"] == {"workflow_id": "kill-worker", "attempt": 2, "from_turns": 3,
                                  "resumed_state": True}
