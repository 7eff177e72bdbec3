"""A nested tree whose middle run delegates again after a crash (issue 32 item 1):
lead -> mid (waited for), mid -> leaf three times, one after another (each waited
for), checkpointed in an SQLite file, for the SIGKILL test
(``test_recover_nested.py``).

``python -m tests.subagent._nestedtree run DB LOG`` runs it, printing ``ready``, then
a line for each tool execution (``write <run id> <call id>``, also appended to LOG);
``python -m tests.subagent._nestedtree recover DB LOG OUT`` recovers what a kill left
and writes ``{"recovered": n, "outputs": [...], "results": [...]}`` to OUT, where
``results`` are the results of mid's calls recorded after the crash (its audit), in
order.

The models are functions of the conversation (how many assistant messages so far),
so a new process continues each script where its checkpoint left it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

import agentcore
from agentcore import FunctionTool, Message, ModelRequest, ToolCall
from agentcore.testing import ScriptedModel
from ledger import MemorySink
from subagent import Pool, Spec, SqliteCheckpoints, SubagentTool, open_pool

#: Each level's turns: the calls of each turn as (tool, arguments).
SCRIPTS: dict[str, list[list[tuple[str, dict[str, Any]]]]] = {
    "lead": [[("subagent", {"agent": "mid", "task": "mid work"})]],
    "mid": [[("subagent", {"agent": "leaf", "task": f"leaf work {n}"})] for n in (1, 2, 3)],
    "leaf": [[("write", {"n": 1})], [("write", {"n": 2})]],
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


def write_tool(log: Path, on_write: Callable[[str], None] | None = None) -> FunctionTool:
    """The leaves' mutating tool: logs ``write <run id> <call id>`` (to LOG and
    stdout), then calls ``on_write`` with that line, if given."""

    async def run(arguments: str) -> str:
        run_ = agentcore.current_run()
        call = agentcore.lowlevel.current_tool_call()
        assert run_ is not None and call is not None
        line = f"write {run_.run_id} {call.id}"
        with log.open("a") as f:
            f.write(line + "\n")
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        if on_write is not None:
            on_write(line)
        await trio.sleep(0.005)
        return "write ok"

    return FunctionTool("write", "write something", {"type": "object"}, run)


def register(pool: Pool, log: Path, audit: MemorySink | None = None, *,
             on_write: Callable[[str], None] | None = None,
             gate: agentcore.ToolGate | None = None) -> None:
    """The tree's specs in ``pool``: ``gate`` (if given) is the leaves'."""
    tools: list[agentcore.Tool] = [write_tool(log, on_write)]
    for name in SCRIPTS:
        extra: list[agentcore.Tool] = [SubagentTool(pool)] if name != "leaf" else []
        pool.register(Spec(name, model=scripted(name), tools=[*tools, *extra], audit=audit,
                           gate=gate if name == "leaf" else None))


def mid_results(audit: MemorySink) -> list[str | None]:
    """The results (or errors) of mid's calls that ``audit`` recorded, in order."""
    return [e.result or e.error for e in audit.entries
            if e.kind == "tool_result" and e.run_id == "lead/0001/mid/0002"]


async def run(db: Path, log: Path) -> None:
    async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
        register(pool, log)
        task = await pool.submit("lead", "go")
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await task.wait()
        sys.stdout.write("finished\n")
        sys.stdout.flush()


async def recover(db: Path, log: Path) -> dict[str, Any]:
    audit = MemorySink()
    async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
        register(pool, log, audit)
        tasks = await pool.recover()
        outputs = [(await task.wait()).output for task in tasks]
    return {"recovered": len(tasks), "outputs": outputs, "results": mid_results(audit)}


def main(argv: list[str]) -> None:
    mode, *paths = argv
    if mode == "run":
        db, log = map(Path, paths)
        trio.run(run, db, log)
    else:
        db, log, out = map(Path, paths)
        out.write_text(json.dumps(trio.run(recover, db, log)))


if __name__ == "__main__":
    main(sys.argv[1:])
