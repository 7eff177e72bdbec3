"""Specs for the durable-approval and control tests: a two-level tree whose child
writes through a deferred (mutating) call, and a root that waits on gates while the
test steers and interrupts it. Scripted models whose replies depend only on the
request, so a resumed run on another worker continues the script."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import trio

from agentcore import FunctionTool, GateDecision, GateRequest, ModelRequest, ToolCall
from agentcore.testing import ScriptedModel, ScriptItem
from subagent import Defaults, Spec, SpecFile

from .trees import _delegate, _reply, _tool_results


async def defer_writes(request: GateRequest) -> GateDecision:
    """Defers every call of ``write`` to a human; allows the rest."""
    await trio.lowlevel.checkpoint()
    if request.call.name == "write":
        return GateDecision.defer("ask a human")
    return GateDecision(True, "allowed")


def writer_tree(log: Path, writes: int = 1) -> SpecFile:
    """``boss`` delegates to ``scribe`` (waiting), which calls the mutating ``write``
    ``writes`` times, one turn after the other (``w1``, ``w2``, ...); ``write`` appends
    its arguments to ``log`` each time it runs."""

    def boss(request: ModelRequest) -> ScriptItem:
        results = _tool_results(request)
        if not results:
            return _reply("", _delegate("d1", "scribe", request.messages[-1].content))
        return _reply(f"boss: {json.loads(results[-1].content)['output']}")

    def scribe(request: ModelRequest) -> ScriptItem:
        results = _tool_results(request)
        if len(results) < writes:
            n = len(results) + 1
            return _reply("", ToolCall(f"w{n}", "write", json.dumps({"text": "hello"})))
        return _reply(f"scribe: {results[-1].content}")

    async def write(arguments: str) -> str:
        with log.open("a") as f:
            f.write(arguments + "\n")
        await trio.lowlevel.checkpoint()
        return "written"

    tool = FunctionTool("write", "Write a line.", {"type": "object"}, write, read_only=False)
    specs = (
        Spec("boss", model=ScriptedModel(boss), delegates_to=("scribe",)),
        Spec("scribe", model=ScriptedModel(scribe), tools=(tool,)),
    )
    return SpecFile("writer", specs, {"boss": ("subagent",)}, {}, Defaults())


class Gates:
    """Two gates the ``hold`` tool waits on in turn (each from a thread)."""

    def __init__(self) -> None:
        self.opened = [threading.Event(), threading.Event()]
        self.waiting = [threading.Event(), threading.Event()]
        self.calls = 0


def steered(gates: Gates) -> SpecFile:
    """``pilot`` calls ``hold`` until interrupted; each answer says the user messages
    it saw, and the tool-less summarising call of an interrupt answers ``summary``."""

    def pilot(request: ModelRequest) -> ScriptItem:
        said = [m.content for m in request.messages if m.role == "user"]
        if not request.tools:
            return _reply(f"summary after {said}")
        turn = len(_tool_results(request))
        return _reply(f"turn {turn} saw {said}", ToolCall(f"h{turn}", "hold", "{}"))

    async def hold(arguments: str) -> str:
        k = gates.calls
        gates.calls += 1
        gates.waiting[k].set()
        opened = await trio.to_thread.run_sync(gates.opened[k].wait, 60.0,
                                               abandon_on_cancel=True)
        return "opened" if opened else "not opened"

    tool = FunctionTool("hold", "Hold.", {"type": "object"}, hold, read_only=True)
    return SpecFile("steered", (Spec("pilot", model=ScriptedModel(pilot), tools=(tool,)),),
                    {}, {}, Defaults())
