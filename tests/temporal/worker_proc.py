"""A worker in its own process, for the tests that SIGKILL one:
``python -m tests.temporal.worker_proc ADDRESS TASK_QUEUE LEDGER_DIR MARKER [LOG]``.

It serves :func:`tests.temporal.trees.chain` whose ``block`` tool, the first time
(``MARKER`` missing), creates ``MARKER`` and blocks forever; any later call answers.
With ``LOG``, it serves :func:`mutating_specs` instead.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import attrs
import trio
from temporalio.client import Client

from agentcore import FunctionTool, Message, ModelRequest, ModelResponse, ToolCall, Usage
from agentcore.testing import ScriptedModel, ScriptItem
from subagent import SpecFile
from subagent.temporal import Worker

from .trees import Blocker, chain


def once_specs(marker: Path) -> SpecFile:
    """``chain`` whose ``block`` blocks the first time only (across processes)."""
    async def block(arguments: str) -> str:
        path = trio.Path(marker)
        if not await path.exists():
            await path.write_text("started")
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()
        return "second time"

    specs = chain(Blocker())
    bottom = specs.specs[2]
    tool = FunctionTool("block", "Block once.", {"type": "object"}, block, read_only=True)
    return attrs.evolve(specs, specs=(*specs.specs[:2], attrs.evolve(bottom, tools=(tool,))))


def mutating_specs(marker: Path, log: Path) -> SpecFile:
    """``chain`` whose ``bottom`` calls two mutating tools, each appending its name to
    ``log`` every time it runs: ``write`` (answers ``"wrote"``), then ``block``,
    which the first time (``MARKER`` missing) creates ``MARKER`` and blocks forever
    (the second time it answers ``"second time"``)."""
    def logged(name: str) -> None:
        with log.open("a") as file:
            file.write(name + "\n")

    async def write(arguments: str) -> str:
        await trio.lowlevel.checkpoint()
        logged("write")
        return "wrote"

    async def block(arguments: str) -> str:
        logged("block")
        path = trio.Path(marker)
        if not await path.exists():
            await path.write_text("started")
            await trio.sleep_forever()
        return "second time"

    def bottom(request: ModelRequest) -> ScriptItem:
        results = [m.content for m in request.messages if m.role == "tool"]
        if len(results) < 2:
            name = ("write", "block")[len(results)]
            call = ToolCall(f"b{len(results)}", name, "{}")
            return ModelResponse(Message("assistant", "", tool_calls=(call,)), "tool_calls",
                                 Usage(10, 2))
        return ModelResponse(Message("assistant", "bottom: " + " / ".join(results)), "stop",
                             Usage(10, 2))

    specs = chain(Blocker())
    tools = (FunctionTool("write", "Write.", {"type": "object"}, write),
             FunctionTool("block", "Block once.", {"type": "object"}, block))
    low = attrs.evolve(specs.specs[2], model=ScriptedModel(bottom), tools=tools)
    return attrs.evolve(specs, specs=(*specs.specs[:2], low))


async def main(address: str, queue: str, ledger_dir: Path, marker: Path,
               log: Path | None) -> None:
    client = await Client.connect(address)
    def specs() -> SpecFile:
        return once_specs(marker) if log is None else mutating_specs(marker, log)

    await Worker(client, queue, specs=specs, ledger_dir=ledger_dir, sticky_timeout=1.0).run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]),
                     Path(sys.argv[5]) if len(sys.argv) > 5 else None))
