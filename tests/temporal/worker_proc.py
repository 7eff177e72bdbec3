"""A worker in its own process, for the tests that SIGKILL one:
``python -m tests.temporal.worker_proc ADDRESS TASK_QUEUE LEDGER_DIR MARKER``.

It serves :func:`tests.temporal.trees.chain` whose ``block`` tool, the first time
(``MARKER`` missing), creates ``MARKER`` and blocks forever; any later call answers.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import attrs
import trio
from temporalio.client import Client

from agentcore import FunctionTool
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


async def main(address: str, queue: str, ledger_dir: Path, marker: Path) -> None:
    client = await Client.connect(address)
    await Worker(client, queue, specs=lambda: once_specs(marker), ledger_dir=ledger_dir,
                 sticky_timeout=1.0).run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])))
