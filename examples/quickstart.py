"""A small agent on the scripted model: one tool call through the gate, then an answer.

Runs fully offline:  python examples/quickstart.py
"""

from __future__ import annotations

import json

import trio

from agentcore import Agent, Event, EventKind, FunctionTool, read_only
from agentcore.testing import ScriptedModel, tool_call_reply
from ledger import MemorySink


async def add(arguments: str) -> str:
    args = json.loads(arguments)
    return str(args["a"] + args["b"])


async def main() -> None:
    adder = FunctionTool(
        "add",
        "Add two integers.",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        add,
        read_only=True,
    )
    model = ScriptedModel([tool_call_reply("add", '{"a": 2, "b": 40}'), "2 + 40 = 42"])
    audit = MemorySink()
    agent = Agent(model=model, tools=[adder], gate=read_only, audit=audit, agent_id="calc")

    async def show(event: Event) -> None:
        detail = ""
        if event.kind is EventKind.tool_end:
            detail = f" -> {event.text}"
        elif event.kind is EventKind.gate_decision and event.decision is not None:
            detail = f" ({'allow' if event.decision.allowed else 'deny'})"
        print(f"  [{event.turn}] {event.kind}{detail}")

    result = await agent.run("What is 2 + 40?", emit=show, path=("calc/0001",))
    print("output:", result.output)
    print("summary:", result.summary)
    print("audit entries:", ", ".join(str(e.kind) for e in audit.entries))


if __name__ == "__main__":
    trio.run(main)
