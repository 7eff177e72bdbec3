"""``subagent mcp SPECS``: the pool as an MCP server, driven by the mcp SDK's own client
over stdio (a real subprocess)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import ledger

from .helpers import FIXTURE, wait_for

SPECS = """
[mcp.fx]
command = {python}
args = [{fixture}]
read_only = ["wait"]

[agents.greeter]
description = "Greets."
model = "scripted:greeter.json"

[agents.waiter]
description = "Waits."
model = "scripted:waiter.json"
tools = ["mcp:fx/wait"]
"""


def write_specs(folder: Path, marker: Path) -> Path:
    specs = folder / "specs.toml"
    specs.write_text(SPECS.format(python=json.dumps(sys.executable), fixture=json.dumps(FIXTURE)))
    (folder / "greeter.json").write_text(json.dumps([{"content": "hello there"}]))
    wait = {"id": "w1", "name": "wait", "arguments": {"marker": str(marker)}}
    (folder / "waiter.json").write_text(json.dumps([{"tool_calls": [wait]}, {"content": "x"}]))
    return specs


@pytest.mark.slow
async def test_an_mcp_client_lists_calls_and_cancels_the_agents(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    specs = write_specs(tmp_path, marker)
    ledger_path = tmp_path / "ledger.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "subagent", "mcp", str(specs), "--ledger", str(ledger_path)],
        cwd=tmp_path,
    )
    seen: list[str] = []

    class Record:
        async def __call__(self, progress: float, total: float | None,
                           message: str | None) -> None:
            await trio.lowlevel.checkpoint()
            seen.append(f"{progress:g} {message}")

    record = Record()

    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listing = await session.list_tools()
        assert [(t.name, t.description) for t in listing.tools] == [
            ("greeter", "Greets."), ("waiter", "Waits.")]
        schema = listing.tools[0].input_schema
        assert (schema["required"], schema["properties"]["task"]["type"]) == (["task"], "string")

        result = await session.call_tool("greeter", {"task": "hi"}, progress_callback=record)
        assert not result.is_error
        assert [c.text for c in result.content if c.type == "text"] == ["hello there"]
        assert seen[:2] == ["1 greeter/0001: task_queued", "2 greeter/0001: task_started"]
        # Numbered in order; the tree's events up to the run's end at least.
        assert [m.split(" ")[0] for m in seen] == [str(n) for n in range(1, len(seen) + 1)]
        assert "greeter/0001: agent_end" in [m.split(" ", 1)[1] for m in seen]

        # The client cancels its call: the task is cancelled, and so is its MCP call.
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def call() -> None:
                with scope:
                    await session.call_tool("waiter", {"task": "wait"})

            nursery.start_soon(call)
            await wait_for(lambda: marker.exists() and marker.read_text() == "started", "started")
            scope.cancel()
        await wait_for(lambda: marker.read_text() == "cancelled", "the server saw the cancel")
    report = ledger.verify(ledger_path)
    assert report.ok
