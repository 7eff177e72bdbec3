"""The ``steer`` and ``interrupt`` signals reach the root of a running tree."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import Client

import ledger
from agentcore import EventKind
from subagent.temporal import (
    DevServer,
    Worker,
    controls_applied,
    events,
    interrupt,
    ledger_name,
    start,
    steer,
)

from .pausing import Gates, steered


async def applied(client: Client, workflow_id: str, count: int) -> None:
    async with asyncio.timeout(30):
        while await controls_applied(client, workflow_id) < count:  # noqa: ASYNC110 (server state: polled)
            await asyncio.sleep(0.05)


async def steer_then_interrupt(server: DevServer, folder: Path, gates: Gates) -> list[str]:
    client = await Client.connect(server.address)
    async with Worker(client, "steer", specs=lambda: steered(gates), ledger_dir=folder):
        handle = await start(client, "pilot", "fly", task_queue="steer", id="steer-1")
        await asyncio.to_thread(gates.waiting[0].wait, 30)
        await steer(client, "steer-1", "turn left")
        await applied(client, "steer-1", 1)
        gates.opened[0].set()  # the run reads the steering before its next model call
        await asyncio.to_thread(gates.waiting[1].wait, 30)
        await interrupt(client, "steer-1")
        await applied(client, "steer-1", 2)
        gates.opened[1].set()
        result = await handle.result()
        seen = [e async for e in events(client, "steer-1")]
    assert result.status == "finished"
    assert result.output == (  # the steering, then the interrupt's own instruction
        "summary after ['fly', 'turn left', 'The user interrupted this run. Do not call "
        "tools. Summarise briefly what you did and found so far, and give your best answer "
        "now.']")
    return [e.kind for e in seen if e.kind in (EventKind.steering_injected,
                                               EventKind.interrupt_received)]


@pytest.mark.slow
def test_steer_and_interrupt_signals_reach_the_root(dev_server: DevServer,
                                                    tmp_path: Path) -> None:
    kinds = asyncio.run(steer_then_interrupt(dev_server, tmp_path, Gates()))
    assert kinds == [EventKind.steering_injected, EventKind.interrupt_received]
    assert ledger.verify(tmp_path / ledger_name("steer-1")).ok
