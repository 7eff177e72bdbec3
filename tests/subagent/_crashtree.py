"""A three-level delegation tree (root -> mid -> leaf, and a background child root ->
side started with ``wait: false`` and waited for with ``subagent_results``) with
mutating, idempotent and read-only tools at every level, checkpointed in an SQLite
file, for the crash tests.

``python -m tests.subagent._crashtree run DB LEDGER LOG`` runs it (printing a line
for each tool execution, so the test can kill it at a chosen point);
``python -m tests.subagent._crashtree recover DB LEDGER LOG OUT`` recovers what a
kill left unfinished and writes ``{"recovered": n, "outputs": [...]}`` to OUT.

Every tool execution appends ``<tool> <run id> <call id>`` to LOG. The models are
functions of the conversation (how many assistant messages so far), so a new
process continues each script where its checkpoint left it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

import agentcore
from agentcore import FunctionTool, Message, ModelRequest, ToolCall
from agentcore.testing import ScriptedModel
from ledger import JsonlSink, repair
from subagent import (
    Pool,
    Spec,
    SqliteCheckpoints,
    SubagentResultsTool,
    SubagentTool,
    open_pool,
)

#: Each level's turns: the calls of each turn as (tool, arguments).
SCRIPTS: dict[str, list[list[tuple[str, dict[str, Any]]]]] = {
    "root": [[("write", {"n": 1})], [("subagent", {"agent": "mid", "task": "mid work"})],
             [("subagent", {"agent": "side", "task": "side work", "wait": False}),
              ("subagent_results", {})],
             [("write", {"n": 2}), ("bump", {"n": 1})]],
    "mid": [[("write", {"n": 1})], [("subagent", {"agent": "leaf", "task": "leaf work"})],
            [("bump", {"n": 1})]],
    "leaf": [[("write", {"n": 1}), ("write", {"n": 2})], [("look", {"n": 1})],
             [("write", {"n": 3})]],
    # A background child of root (wait: false), which root waits for.
    "side": [[("write", {"n": 1})]],
}


def scripted(name: str) -> ScriptedModel:
    steps = SCRIPTS[name]

    def reply(request: ModelRequest) -> Message:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n >= len(steps):
            errors = sum(1 for m in request.messages if m.role == "tool" and m.is_error)
            return Message("assistant", f"{name} done, {errors} errors")
        calls = [ToolCall(f"{name}-{n}-{k}", tool, json.dumps(args))
                 for k, (tool, args) in enumerate(steps[n])]
        return Message("assistant", f"{name} turn {n}", tool_calls=calls)

    return ScriptedModel(reply)


def logging_tool(log: Path, name: str, *, read_only: bool = False,
                 idempotent: bool = False) -> FunctionTool:
    async def run(arguments: str) -> str:
        run_ = agentcore.current_run()
        call = agentcore.lowlevel.current_tool_call()
        assert run_ is not None and call is not None
        with log.open("a") as f:
            f.write(f"{name} {run_.run_id} {call.id}\n")
        sys.stdout.write(f"{name}\n")
        sys.stdout.flush()
        await trio.sleep(0.005)
        return f"{name} ok"

    return FunctionTool(name, f"{name} something", {"type": "object"}, run,
                        read_only=read_only, idempotent=idempotent)


def register(pool: Pool, sink: JsonlSink, log: Path) -> None:
    """The tree's specs, all audited to ``sink``."""
    tools = [logging_tool(log, "write"), logging_tool(log, "bump", idempotent=True),
             logging_tool(log, "look", read_only=True)]
    for name in SCRIPTS:
        delegation: list[agentcore.Tool] = []
        if name in ("root", "mid"):
            delegation = [SubagentTool(pool), SubagentResultsTool(pool)]
        pool.register(Spec(name, model=scripted(name), tools=[*tools, *delegation],
                           audit=sink))


async def run(db: Path, ledger: Path, log: Path) -> None:
    sink = JsonlSink(ledger)
    async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
        register(pool, sink, log)
        task = await pool.submit("root", "go")
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await task.wait()
        sys.stdout.write("finished\n")
        sys.stdout.flush()
    await sink.aclose()


async def recover(db: Path, ledger: Path, log: Path) -> dict[str, Any]:
    sink = JsonlSink(ledger)
    async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
        register(pool, sink, log)
        tasks = await pool.recover()
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        outputs = [(await task.wait()).output for task in tasks]
    await sink.aclose()
    return {"recovered": len(tasks), "outputs": outputs}


def main(argv: list[str]) -> None:
    mode, *paths = argv
    if mode == "run":
        db, ledger, log = map(Path, paths)
        trio.run(run, db, ledger, log)
    else:
        db, ledger, log, out = map(Path, paths)
        result: dict[str, Any] = {"recovered": 0, "outputs": []}
        if db.exists():  # else killed before its first checkpoint: nothing to recover
            if ledger.exists():
                repair(ledger)  # the killed writer may have left a torn last line
            result = trio.run(recover, db, ledger, log)
        out.write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
