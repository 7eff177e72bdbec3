"""Spec files the Temporal tests run, on scripted models whose replies depend only on
the request (so the same specs give the same run in-process and on a worker)."""

from __future__ import annotations

import json
import threading

import trio

from agentcore import FunctionTool, Message, ModelRequest, ModelResponse, ToolCall, Usage
from agentcore.testing import ScriptedModel, ScriptItem
from subagent import Defaults, Spec, SpecFile


def _reply(text: str, *calls: ToolCall) -> ScriptItem:
    return ModelResponse(Message("assistant", text, tool_calls=calls),
                         "tool_calls" if calls else "stop", Usage(10, 2))


def _tool_results(request: ModelRequest) -> list[Message]:
    return [m for m in request.messages if m.role == "tool"]


def _delegate(call_id: str, agent: str, task: str) -> ToolCall:
    return ToolCall(call_id, "subagent", json.dumps({"agent": agent, "task": task}))


def boss(request: ModelRequest) -> ScriptItem:
    """Delegates its task to ``helper`` (waiting), then answers with the result."""
    results = _tool_results(request)
    if not results:
        return _reply("asking helper", _delegate("d1", "helper", request.messages[-1].content))
    return _reply(f"boss says: {results[-1].content}")


def helper(request: ModelRequest) -> ScriptItem:
    """Looks the task up with its tool, then answers."""
    results = _tool_results(request)
    if not results:
        return _reply("", ToolCall("l1", "lookup", json.dumps({"q": "trio"})))
    return _reply(f"helper found {results[-1].content}")


async def _lookup(arguments: str) -> str:
    await trio.lowlevel.checkpoint()
    query: str = json.loads(arguments)["q"]
    return "q=" + query


def two_level() -> SpecFile:
    """``boss`` delegates to ``helper`` (waiting for it), which calls a read-only tool."""
    lookup = FunctionTool("lookup", "Look a word up.", {"type": "object"}, _lookup,
                          read_only=True)
    specs = (
        Spec("boss", model=ScriptedModel(boss), delegates_to=("helper",)),
        Spec("helper", model=ScriptedModel(helper), tools=(lookup,)),
    )
    return SpecFile("two-level", specs, {"boss": ("subagent",)}, {}, Defaults())


def echo_specs() -> SpecFile:
    """``echo`` answers ``"echo: <task>"`` in one turn."""
    def echo(request: ModelRequest) -> ScriptItem:
        return _reply("echo: " + request.messages[-1].content)

    return SpecFile("echo", (Spec("echo", model=ScriptedModel(echo)),), {}, {}, Defaults())


class Blocker:
    """A tool that blocks until cancelled, counting the calls that started and ended."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = 0
        self.lock = threading.Lock()

    async def __call__(self, arguments: str) -> str:
        self.started.set()
        try:
            await trio.sleep_forever()
        finally:
            with self.lock:
                self.cancelled += 1


def chain(blocker: Blocker, gate: threading.Event | None = None) -> SpecFile:
    """``top`` -> ``middle`` -> ``bottom`` (each waiting), ``bottom`` calls ``block``.

    With ``gate``, ``block`` waits for it (in a thread) and answers instead.
    """
    def top(request: ModelRequest) -> ScriptItem:
        results = _tool_results(request)
        if not results:
            return _reply("", _delegate("t1", "middle", "go"))
        return _reply(f"top: {results[-1].content}")

    def middle(request: ModelRequest) -> ScriptItem:
        results = _tool_results(request)
        if not results:
            return _reply("", _delegate("m1", "bottom", "go"))
        return _reply(f"middle: {results[-1].content}")

    def bottom(request: ModelRequest) -> ScriptItem:
        results = _tool_results(request)
        if not results:
            return _reply("", ToolCall("b1", "block", "{}"))
        return _reply(f"bottom: {results[-1].content}")

    async def wait_gate(arguments: str) -> str:
        assert gate is not None
        blocker.started.set()
        opened = await trio.to_thread.run_sync(gate.wait, 60.0)
        return "opened" if opened else "not opened"

    block = FunctionTool("block", "Block.", {"type": "object"},
                         blocker if gate is None else wait_gate, read_only=True)
    specs = (
        Spec("top", model=ScriptedModel(top), delegates_to=("middle",)),
        Spec("middle", model=ScriptedModel(middle), delegates_to=("bottom",)),
        Spec("bottom", model=ScriptedModel(bottom), tools=(block,)),
    )
    return SpecFile("chain", specs, {"top": ("subagent",), "middle": ("subagent",)}, {},
                    Defaults())
