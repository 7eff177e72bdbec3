"""The process ``test_bg_result_crash.py`` kills: ``root`` starts ``bg`` in the
background (``wait: false``) and its next model call never returns; ``bg`` works and
ends; the process prints ``kept`` once ``bg``'s result is committed in its row
(``SqliteCheckpoints.write_kept``), unread by ``root``, and waits to be killed.

Run as ``python -m tests.subagent._bgcrash DB LEDGER LOG``."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from agentcore import Message, ModelRequest, ModelResponse, RunState
from ledger import JsonlSink
from subagent import Spec, SqliteCheckpoints, SubagentResultsTool, SubagentTool, open_pool
from tests.subagent._bgparts import START
from tests.subagent.test_recover_background import register


class Announcing(SqliteCheckpoints):
    """Prints ``kept`` once a kept result is committed."""

    async def write_kept(
        self, name: str, parent: str | None, call_id: str | None, state: RunState
    ) -> None:
        await super().write_kept(name, parent, call_id, state)
        print("kept", flush=True)


class StartsThenHangs:
    """``root``: starts ``bg``, then waits forever in its next call."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if not any(m.role == "assistant" for m in request.messages):
            return ModelResponse(Message("assistant", "", tool_calls=[START]))
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def run(db: Path, ledger: Path, log: Path) -> None:
    sink = JsonlSink(ledger)
    async with Announcing(db) as store, open_pool(checkpoints=store) as pool:
        register(pool, sink, log)  # "bg" with its logging "work" tool, in sink
        pool.register(Spec("root", model=StartsThenHangs(), audit=sink,
                           tools=[SubagentTool(pool), SubagentResultsTool(pool)]))
        await (await pool.submit("root", "go")).wait()


if __name__ == "__main__":
    trio.run(run, Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
