"""Cancelling a root workflow aborts its whole tree; many roots on two workers finish."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import attrs
import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import CancelledError

import ledger
from subagent import EventKind, SpecFile
from subagent.temporal import DevServer, RootResult, Worker, events, ledger_name, start

from .trees import Blocker, chain, echo_specs

PATHS = [("top/0001",), ("top/0001", "middle/0002"), ("top/0001", "middle/0002", "bottom/0003")]


async def cancel_tree(server: DevServer, folder: Path, blocker: Blocker) -> None:
    client = await Client.connect(server.address)
    async with Worker(client, "cancel", specs=lambda: chain(blocker), ledger_dir=folder):
        handle = await start(client, "top", "go", task_queue="cancel", id="cancel-1")
        await asyncio.to_thread(blocker.started.wait, 30)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
        assert isinstance(caught.value.cause, CancelledError)
        assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
        seen = [event async for event in events(client, "cancel-1")]
    cancelled = [e.path for e in seen if e.kind == EventKind.task_cancelled]
    assert sorted(cancelled) == PATHS
    assert [e.path for e in seen if e.kind == EventKind.task_finished] == []
    assert blocker.cancelled == 1


@pytest.mark.slow
def test_workflow_cancel_reaches_every_task(dev_server: DevServer, tmp_path: Path) -> None:
    blocker = Blocker()
    asyncio.run(cancel_tree(dev_server, tmp_path, blocker))
    report = ledger.verify(tmp_path / ledger_name("cancel-1"))
    assert report.ok


async def many_roots(server: DevServer, count: int) -> list[RootResult]:
    clients = [await Client.connect(server.address) for _ in range(2)]
    async with (
        Worker(clients[0], "many", specs=echo_specs(), max_concurrent_roots=32),
        Worker(clients[1], "many", specs=echo_specs(), max_concurrent_roots=32),
    ):
        handles = [await start(clients[0], "echo", f"n{i}", task_queue="many", id=f"many-{i}")
                   for i in range(count)]
        return list(await asyncio.gather(*(h.result() for h in handles)))


@pytest.mark.slow
def test_a_hundred_roots_on_two_workers_finish(dev_server: DevServer) -> None:
    results = asyncio.run(many_roots(dev_server, 100))
    assert [r.output for r in results] == [f"echo: n{i}" for i in range(100)]
    assert {r.status for r in results} == {"finished"}
    assert {r.events for r in results} == {8}


async def timeout_and_unknown(server: DevServer) -> None:
    client = await Client.connect(server.address)
    specs = echo_specs()
    timed = SpecFile(specs.source, (attrs.evolve(specs.specs[0], timeout=42.0),), {}, {},
                     specs.defaults)
    async with Worker(client, "limits", specs=timed):
        handle = await start(client, "echo", "hi", task_queue="limits", id="limits-1",
                             specs=timed)
        config = (await handle.describe()).raw_description.execution_config
        assert config.workflow_execution_timeout.ToTimedelta() == timedelta(seconds=42)
        assert (await handle.result()).output == "echo: hi"
        # A name the worker does not hold (no specs given to start to check it).
        unknown = await start(client, "nobody", "hi", task_queue="limits", id="limits-2")
        assert await unknown.result() == RootResult(
            "failed", "", "unknown agent 'nobody'; registered agents: echo"
        )


@pytest.mark.slow
def test_spec_timeout_is_the_execution_timeout_and_unknown_agents_fail(
    dev_server: DevServer,
) -> None:
    asyncio.run(timeout_and_unknown(dev_server))
