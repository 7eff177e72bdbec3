"""A scripted workload for the pause/resume tests, the same in the test process and
in the child process that resumes a stored state (``python -m
tests.agentcore._durable WORKLOAD STATE LEDGER OUT``).

The model is a function of the conversation (the number of assistant messages so
far picks the reply), so a fresh process continues the script where it stopped.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import trio
import trio.testing

from agentcore import (
    Agent,
    Event,
    FunctionTool,
    GateDecision,
    GateRequest,
    Message,
    ModelRequest,
    RunState,
    ToolCall,
    ToolGate,
)
from agentcore.testing import ScriptedModel
from ledger import JsonlSink

#: A workload: turns of tool calls, each call ``[id, tool, seconds]``; a call of
#: "look" is read-only (runs in a batch), "write" is not.
Workload = list[list[list[Any]]]


def make_tool(name: str, read_only: bool) -> FunctionTool:
    async def run(arguments: str) -> str:
        seconds = json.loads(arguments)["s"]
        await trio.sleep(seconds)
        return f"{name} {arguments}"

    return FunctionTool(name, f"{name} something", {"type": "object"}, run, read_only)


def model(workload: Workload) -> ScriptedModel:
    def reply(request: ModelRequest) -> Message:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n == len(workload):
            return Message("assistant", f"done after {n} turns")
        calls = [ToolCall(c[0], c[1], json.dumps({"s": c[2]})) for c in workload[n]]
        return Message("assistant", f"turn {n}", tool_calls=calls)

    return ScriptedModel(reply)


def gate(target: str, answer: GateDecision | None) -> ToolGate:
    """Allows every call but ``target``: deferred (``answer`` None) or answered."""

    async def decide(request: GateRequest) -> GateDecision:
        await trio.lowlevel.checkpoint()
        if request.call.id != target:
            return GateDecision(True, "allowed")
        return GateDecision.defer("ask a human") if answer is None else answer

    return decide


def agent(workload: Workload, gate: ToolGate | None, audit: Any = None) -> Agent:
    return Agent(
        model=model(workload),
        tools=[make_tool("look", True), make_tool("write", False)],
        agent_id="worker",
        gate=gate,
        audit=audit,
        max_turns=50,
    )


def event_value(e: Event) -> list[Any]:
    """An event as JSON-able values (everything but nothing)."""
    call = e.call and [e.call.id, e.call.name, e.call.arguments]
    decision = e.decision and [e.decision.allowed, e.decision.reason, e.decision.deferred]
    summary = e.summary and [
        e.summary.turns, e.summary.tool_calls, e.summary.tool_errors, e.summary.denied,
        str(e.summary.end_reason), e.summary.error, e.summary.duration,
    ]
    message = e.message and [e.message.role, e.message.content, len(e.message.tool_calls)]
    return [str(e.kind), e.run_id, e.agent_id, e.turn, e.text, message, call, decision,
            e.is_error, summary, e.attempt]


def message_value(m: Message) -> list[Any]:
    return [m.role, m.content, [[c.id, c.name, c.arguments] for c in m.tool_calls],
            m.tool_call_id, m.is_error]


async def _resume(workload: Workload, state_text: str, ledger: str) -> dict[str, Any]:
    events: list[Event] = []

    async def emit(e: Event) -> None:
        events.append(e)

    sink = JsonlSink(ledger)
    try:
        state = RunState.from_json(state_text)
        result = await agent(workload, gate("", None), sink).resume(state, emit=emit)
    finally:
        await sink.aclose()
    return {
        "output": result.output,
        "messages": [message_value(m) for m in result.messages],
        "events": [event_value(e) for e in events],
    }


def main(argv: list[str]) -> None:
    workload_path, state_path, ledger, out = argv
    with open(workload_path) as f:
        workload = json.load(f)
    with open(state_path) as f:
        state_text = f.read()
    clock = trio.testing.MockClock(autojump_threshold=0)
    value = trio.run(_resume, workload, state_text, ledger, clock=clock)
    with open(out, "w") as f:
        json.dump(value, f)


if __name__ == "__main__":
    main(sys.argv[1:])
