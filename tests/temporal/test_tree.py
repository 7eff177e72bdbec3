"""A delegation tree on Temporal gives what it gives in-process: events, output, ledger."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import attrs
import trio
from temporalio.client import Client

import ledger
from subagent import Event, SpecFile, Stream, open_pool
from subagent._delegation._tool import SubagentTool
from subagent._ledgerfile import open_sink
from subagent.temporal import DevServer, RootResult, Worker, events, ledger_name, start

from .trees import two_level


def normal(event: Event) -> Event:
    """``event`` without what differs between two runs of the same script (durations)."""
    if event.summary is not None:
        event = attrs.evolve(event, summary=attrs.evolve(event.summary, duration=0.0))
    inner = event.event
    if inner is not None and inner.summary is not None:
        inner = attrs.evolve(inner, summary=attrs.evolve(inner.summary, duration=0.0))
        event = attrs.evolve(event, event=inner)
    return event


def entries(path: Path) -> list[dict[str, Any]]:
    """The ledger's entries without time, hash and durations."""
    out = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        for key in ("time", "hash", "prev_hash", "duration", "run_id"):
            entry.pop(key, None)
        entry.get("data", {}).pop("duration", None)
        out.append(entry)
    return out


async def in_process(specs: SpecFile, agent: str, text: str, ledger_path: Path) -> tuple[
        list[Event], str]:
    stream = Stream(10_000)
    sink = open_sink(ledger_path)
    defaults = attrs.evolve(specs.defaults, audit=sink)
    async with open_pool(defaults=defaults, events=stream) as pool:
        for spec in specs.specs_for({"subagent": SubagentTool(pool)}):
            pool.register(spec)
        result = await (await pool.submit(agent, text)).wait()
    await sink.aclose()
    stream.close()
    return [event async for event in stream], result.output


async def on_temporal(server: DevServer, folder: Path) -> tuple[list[Event], RootResult]:
    client = await Client.connect(server.address)
    async with Worker(client, "tree", specs=two_level, ledger_dir=folder):
        handle = await start(client, "boss", "find trio", task_queue="tree", id="tree-1")
        seen = [event async for event in events(client, "tree-1")]
        return seen, await handle.result()


def test_two_level_tree_matches_in_process(dev_server: DevServer, tmp_path: Path) -> None:
    local_ledger = tmp_path / "local.jsonl"
    local, output = trio.run(in_process, two_level(), "boss", "find trio", local_ledger)
    remote, result = asyncio.run(on_temporal(dev_server, tmp_path / "ledgers"))
    assert output == ('boss says: {"agent": "helper", "path": ["boss/0001", "helper/0002"], '
                      '"output": "helper found q=trio"}')
    assert result == RootResult("finished", output, None, 40, 8, len(local),
                                ledger_name("tree-1"))
    assert [normal(e) for e in remote] == [normal(e) for e in local]
    assert {e.path for e in remote} == {("boss/0001",), ("boss/0001", "helper/0002")}
    remote_ledger = tmp_path / "ledgers" / ledger_name("tree-1")
    report = ledger.verify(remote_ledger)
    assert report.ok and report.entries == len(entries(local_ledger))
    assert entries(remote_ledger) == entries(local_ledger)
