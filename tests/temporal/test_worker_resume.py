"""A worker SIGKILLed mid-run after a mutating call finished and while another is in
flight: a second worker resumes the tree from the last heartbeat (the tree's
checkpoints) and runs neither again (the never-repeat rule, as after a local crash).

The kill comes once the blocking mutating call has started: its ``call`` checkpoint
was recorded on the server (an awaited heartbeat RPC) before it ran, so the server
holds a heartbeat showing ``write`` finished and ``block`` in flight.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client

import agentcore
import ledger
from subagent.temporal import DevServer, RunOptions, Worker, ledger_name, start

from .worker_proc import mutating_specs

ROOT = Path(__file__).resolve().parents[2]


async def kill_and_resume(server: DevServer, tmp_path: Path,
                          first: subprocess.Popen[bytes]) -> str:
    marker, log = tmp_path / "started", tmp_path / "calls.log"
    client = await Client.connect(server.address)
    handle = await start(client, "top", "go", task_queue="resumeq", id="resume-worker",
                         options=RunOptions(heartbeat_timeout=2.0, max_attempts=2))
    async with asyncio.timeout(60):
        while not marker.exists():  # noqa: ASYNC110 (another process's file: polled)
            await asyncio.sleep(0.05)
    first.kill()
    first.wait()
    async with Worker(client, "resumeq", specs=lambda: mutating_specs(marker, log),
                      ledger_dir=tmp_path / "ledgers"):
        result = await handle.result()
    assert result.status == "finished"
    return result.output


@pytest.mark.slow
def test_a_second_worker_resumes_without_repeating_a_mutating_call(
        dev_server: DevServer, tmp_path: Path) -> None:
    first = subprocess.Popen(
        [sys.executable, "-m", "tests.temporal.worker_proc", dev_server.address, "resumeq",
         str(tmp_path / "ledgers"), str(tmp_path / "started"), str(tmp_path / "calls.log")],
        cwd=ROOT, stdin=subprocess.DEVNULL,
    )
    try:
        output = asyncio.run(kill_and_resume(dev_server, tmp_path, first))
    finally:
        first.kill()
        first.wait()
    # Each mutating call ran once: the finished one and the one in flight at the kill.
    assert (tmp_path / "calls.log").read_text() == "write\nblock\n"
    bottom = {"agent": "bottom", "path": ["top/0001", "middle/0002", "bottom/0003"],
              "output": f"bottom: wrote / {agentcore.lowlevel.INTERRUPTED}"}
    middle = {"agent": "middle", "path": ["top/0001", "middle/0002"],
              "output": "middle: " + json.dumps(bottom)}
    assert output == "top: " + json.dumps(middle)
    path = tmp_path / "ledgers" / ledger_name("resume-worker")
    assert ledger.verify(path).ok
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    resumed = [e for e in entries if e["kind"] == "attempt_resumed"]
    assert [e["data"] for e in resumed] == [{
        "workflow_id": "resume-worker", "attempt": 2, "from_turns": 4, "resumed_state": True}]
    # Each run of the tree resumed from its last checkpoint; only bottom had a call
    # in flight (``block``, mutating: interrupted, not repeated).
    kinds = [e["kind"] for e in entries]
    assert kinds.index("attempt_resumed") < kinds.index("run_resumed")
    assert [e["data"] for e in entries if e["kind"] == "run_resumed"] == [
        {"answers": 0, "checkpoint": "top/0001@2", "interrupted": "", "pending": 1},
        {"answers": 0, "checkpoint": "top/0001/middle/0002@2", "interrupted": "", "pending": 1},
        {"answers": 0, "checkpoint": "top/0001/middle/0002/bottom/0003@4", "interrupted": "b1",
         "pending": 1},
    ]
