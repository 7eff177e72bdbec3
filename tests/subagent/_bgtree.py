"""A root with one background child (``wait: false``), for the tests of a paused tree
whose background child is running, paused or ended but unread when the tree pauses;
``python -m tests.subagent._bgtree CASE STATE LEDGER LOG OUT`` resumes a stored
state of it in a new process.

root: turn 0 starts ``bg`` in the background (call ``start-bg``); turn 1 depends on
the case; then it waits with ``subagent_results`` until a result message is in its
conversation, and answers ``root got <output>``.

- ``running``: root's turn 1 is ``slow`` 1 s then ``write`` (deferred at t=1)
  while bg sleeps 5 s in its ``slow`` call: bg is paused after that call.
- ``ended``: root's turn 1 is ``slow`` 5 s then ``write`` (deferred at t=5); bg
  (``slow`` 1 s) has ended at t=1, its result unread.
- ``paused``: root's turn 1 is ``slow`` 5 s; bg's own ``bwrite`` is deferred at
  t=0: bg pauses, and so does root after its ``slow`` call.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio
import trio.testing

from agentcore import FunctionTool, Message, ModelRequest, RunState, ToolCall
from agentcore.testing import ScriptedModel
from ledger import JsonlSink
from subagent import Pool, Spec, SubagentResultsTool, SubagentTool
from subagent._reply import RESULT_PREFIX
from tests.agentcore._durable import gate

CASES = ("running", "ended", "paused")


def _call(id: str, name: str, arguments: dict[str, object]) -> ToolCall:
    return ToolCall(id, name, json.dumps(arguments))


def root_model(case: str) -> ScriptedModel:
    def reply(request: ModelRequest) -> Message:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n == 0:
            start = {"agent": "bg", "task": "work", "wait": False}
            return Message("assistant", "", tool_calls=[_call("start-bg", "subagent", start)])
        if n == 1:
            calls = {
                "running": [_call("s1", "slow", {"s": 1}), _call("w1", "write", {"s": 0})],
                "ended": [_call("s1", "slow", {"s": 5}), _call("w1", "write", {"s": 0})],
                "paused": [_call("s1", "slow", {"s": 5})],
            }[case]
            return Message("assistant", "", tool_calls=calls)
        for m in request.messages:
            if m.role == "user" and m.content.startswith(RESULT_PREFIX):
                body = json.loads(m.content[len(RESULT_PREFIX):])
                return Message("assistant", f"root got {body.get('output', body.get('error'))}")
        return Message("assistant", "", tool_calls=[_call(f"wait{n}", "subagent_results", {})])

    return ScriptedModel(reply)


def bg_model(case: str) -> ScriptedModel:
    def reply(request: ModelRequest) -> Message:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n == 0:
            call = {
                "running": _call("b1", "slow", {"s": 5}),
                "ended": _call("b1", "slow", {"s": 1}),
                "paused": _call("b1", "bwrite", {"s": 0}),
            }[case]
            return Message("assistant", "", tool_calls=[call])
        return Message("assistant", f"bg done: {request.messages[-1].content}")

    return ScriptedModel(reply)


def register(pool: Pool, sink: JsonlSink, log: Path, case: str) -> None:
    """The two specs; ``write`` and ``bwrite`` append a line to ``log`` when they run."""

    def writer(name: str) -> FunctionTool:
        async def run(arguments: str) -> str:
            with log.open("a") as f:
                f.write(f"{name} {arguments}\n")
            await trio.sleep(1)
            return f"{name} written"

        return FunctionTool(name, name, {"type": "object"}, run)

    async def slow(arguments: str) -> str:
        await trio.sleep(json.loads(arguments)["s"])
        return "slept"

    slow_tool = FunctionTool("slow", "slow", {"type": "object"}, slow, read_only=True)
    pool.register(Spec("root", model=root_model(case), audit=sink, gate=gate("w1", None),
                       tools=[SubagentTool(pool), SubagentResultsTool(pool), slow_tool,
                              writer("write")]))
    pool.register(Spec("bg", model=bg_model(case), audit=sink, gate=gate("b1", None)
                       if case == "paused" else None, tools=[slow_tool, writer("bwrite")]))


async def _resume(case: str, state_text: str, ledger: Path, log: Path) -> str:
    from subagent import open_pool

    sink = JsonlSink(ledger)
    try:
        async with open_pool() as pool:
            register(pool, sink, log, case)
            task = await pool.resume(RunState.from_json(state_text))
            return (await task.wait()).output
    finally:
        await sink.aclose()


def main(argv: list[str]) -> None:
    case = argv[0]
    state, ledger, log, out = map(Path, argv[1:])
    output = trio.run(_resume, case, state.read_text(), ledger, log,
                      clock=trio.testing.MockClock(autojump_threshold=0))
    out.write_text(output)


if __name__ == "__main__":
    main(sys.argv[1:])
