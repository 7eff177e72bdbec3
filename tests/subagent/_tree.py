"""A three-level delegation tree (root -> mid -> leaf) whose leaf writes through a
deferred call, for the tree pause tests; ``python -m tests.subagent._tree STATE
LEDGER LOG OUT`` resumes a stored state of it in a new process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio
import trio.testing

from agentcore import FunctionTool, Message, ModelRequest, RunState, ToolCall
from agentcore.testing import ScriptedModel
from ledger import JsonlSink
from subagent import Pool, Spec, SubagentTool
from tests.agentcore._durable import gate, model


def delegating(child: str) -> ScriptedModel:
    """Delegates once to ``child``, then answers with what it got back."""

    def reply(request: ModelRequest) -> Message:
        if not any(m.role == "assistant" for m in request.messages):
            call = ToolCall(f"to-{child}", "subagent",
                            json.dumps({"agent": child, "task": "go on"}))
            return Message("assistant", "", tool_calls=[call])
        return Message("assistant", "got " + json.loads(request.messages[-1].content)["output"])

    return ScriptedModel(reply)


def register(pool: Pool, sink: JsonlSink, log: Path) -> None:
    """The tree's specs; the leaf's ``write`` appends a line to ``log`` when it runs."""

    async def write(arguments: str) -> str:
        with log.open("a") as f:
            f.write(arguments + "\n")
        await trio.sleep(1)
        return "written"

    tools = [SubagentTool(pool)]
    pool.register(Spec("root", model=delegating("mid"), tools=tools, audit=sink))
    pool.register(Spec("mid", model=delegating("leaf"), tools=tools, audit=sink))
    pool.register(Spec("leaf", model=model([[["c1", "write", 0]]]), audit=sink,
                       gate=gate("c1", None), tools=[FunctionTool("write", "w", {}, write)]))


async def _resume(state_text: str, ledger: Path, log: Path) -> str:
    from subagent import open_pool

    sink = JsonlSink(ledger)
    try:
        async with open_pool() as pool:
            register(pool, sink, log)
            task = await pool.resume(RunState.from_json(state_text))
            return (await task.wait()).output
    finally:
        await sink.aclose()


def main(argv: list[str]) -> None:
    state, ledger, log, out = map(Path, argv)
    output = trio.run(_resume, state.read_text(), ledger, log,
                      clock=trio.testing.MockClock(autojump_threshold=0))
    out.write_text(output)


if __name__ == "__main__":
    main(sys.argv[1:])
