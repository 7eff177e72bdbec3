"""``subagent demo``: a small delegation tree on scripted models, fully offline.

A coordinator starts three subagents in the background (they run in parallel), waits
for their results and merges them; the researcher delegates further to a fact
checker; the reader uses the workspace tools on a bundled sample directory; the
reviewer answers with typed output (a ``Review``, through ``final_result``), which the
coordinator reads as data. Every
model call takes a moment (real time) so the live tree can be watched. The
run is audited to a ledger file, which is verified at the end.

Scripted calls cost nothing, so the demo prices them with its own table
(:data:`DEMO_PRICES`, round figures that are no real model's, and the demo says so)
through the same ``price`` the adapters use: the tree's cost and the budget left are
computed exactly as for real models. The pool has a budget (:data:`BUDGET`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import attrs

from agentcore import FINAL_RESULT, ChatModel, Message, ModelRequest, ModelResponse, ToolCall, Usage
from agentcore.models import ModelPrices, PriceTable, price
from agentcore.testing import Delayed, ScriptedModel, ScriptItem

from .._cost._budget import Budget
from .._reply import RESULT_PREFIX
from .._specs._file import SpecFile
from .._specs._spec import Defaults, Spec
from ..tools import workspace_tools

SAMPLE = Path(__file__).parent / "_demo_sample"
PAUSE = 0.3
TASK = "Survey the notes in the workspace and tell me what this project cares about."
SUBTASKS = {
    "researcher": "Explain what structured concurrency guarantees.",
    "reader": "Find every note that mentions nurseries and quote the main idea.",
    "reviewer": "Review the todo list and say which item matters most.",
}


@attrs.frozen
class Finding:
    """One item of the todo list, as the reviewer judges it."""

    item: str
    priority: Literal["high", "medium", "low"]
    why: str


@attrs.frozen
class Review:
    """The reviewer's typed answer: its findings, and the one that matters most."""

    findings: list[Finding]
    most_important: str


#: The demo's own prices (US dollars per million tokens), for illustration only.
DEMO_PRICES: PriceTable = {"demo": ModelPrices(input=1.0, output=4.0)}
PRICING = (
    "prices: the demo's own table ($1 per million input tokens, $4 per million output), "
    "no real model's\nbudget: 20000 tokens and $0.02 for the whole tree"
)
#: The pool's budget: what the whole tree may spend.
BUDGET = Budget(tokens=20_000, cost=0.02)


@attrs.define(eq=False)
class DemoPriced:
    """A scripted model whose answers are priced with :data:`DEMO_PRICES` (as model
    ``demo``), the way the adapters price theirs with a ``prices=`` table."""

    inner: ChatModel
    model: str = "demo"
    prices: PriceTable = DEMO_PRICES

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The scripted answer, with its usage priced. A checkpoint."""
        response = await self.inner.complete(request)
        usage = attrs.evolve(response.usage, model=self.model)
        usage = attrs.evolve(usage, cost=price(usage, self.prices))
        return attrs.evolve(response, usage=usage)


def _model(script: Callable[[ModelRequest], ScriptItem]) -> ChatModel:
    return DemoPriced(ScriptedModel(script))


def _reply(text: str, *, calls: tuple[ToolCall, ...] = (), tokens: int = 40) -> ScriptItem:
    message = Message("assistant", text, tool_calls=calls)
    reason = "tool_calls" if calls else "stop"
    return Delayed(PAUSE, ModelResponse(message, reason, Usage(10 * tokens, tokens)))


def _delegate(call_id: str, agent: str, task: str, *, wait: bool = True) -> ToolCall:
    arguments = {"agent": agent, "task": task, "wait": wait}
    return ToolCall(call_id, "subagent", json.dumps(arguments))


def _shown(delivered: dict[str, Any]) -> str:
    # A delivered result: a typed one (the reviewer's Review) is read as data.
    if "error" in delivered:
        return f"(failed) {delivered['error']}"
    output = delivered["output"]
    if isinstance(output, dict):
        high = sum(f["priority"] == "high" for f in output["findings"])
        return f"{output['most_important']} ({len(output['findings'])} findings, {high} high)"
    return str(output)


def _tool_results(request: ModelRequest) -> list[Message]:
    return [m for m in request.messages if m.role == "tool"]


def coordinator(request: ModelRequest) -> ScriptItem:
    delivered = [
        json.loads(m.content[len(RESULT_PREFIX):])
        for m in request.messages
        if m.role == "user" and m.content.startswith(RESULT_PREFIX)
    ]
    if len(delivered) == len(SUBTASKS):
        order = list(SUBTASKS)
        delivered.sort(key=lambda d: order.index(d["agent"]))
        lines = [f"- {d['agent']}: {_shown(d)}" for d in delivered]
        return _reply("What this project cares about:\n" + "\n".join(lines), tokens=90)
    waits = len(_tool_results(request)) - len(SUBTASKS)
    if waits >= 0:  # the three are started; wait until every result is in
        wait = ToolCall(f"w{waits + 1}", "subagent_results", json.dumps({"all": True}))
        return _reply("Three subagents are at work; waiting for them.", calls=(wait,))
    calls = tuple(
        _delegate(f"d{i}", agent, task, wait=False)
        for i, (agent, task) in enumerate(SUBTASKS.items(), 1)
    )
    return _reply("I will split this three ways, in parallel.", calls=calls, tokens=60)


def researcher(request: ModelRequest) -> ScriptItem:
    results = _tool_results(request)
    if not results:
        check = "Is it true that a nursery waits for all of its tasks?"
        return _reply("Let me get that checked.", calls=(_delegate("f1", "fact_checker", check),))
    checked = json.loads(results[0].content)["output"]
    return _reply(f"Nothing outlives the block that started it ({checked}).")


def fact_checker(request: ModelRequest) -> ScriptItem:
    return _reply("confirmed: a nursery exits only after all of its tasks", tokens=20)


def reader(request: ModelRequest) -> ScriptItem:
    results = _tool_results(request)
    step = len(results)
    if step == 0:
        return _reply("", calls=(ToolCall("r1", "list_dir", json.dumps({"path": "notes"})),))
    if step == 1:
        return _reply("", calls=(ToolCall("r2", "grep", json.dumps({"pattern": "nurser"})),))
    if step == 2:
        files = [line.split(":", 1)[0] for line in results[1].content.splitlines()]
        busiest = max(sorted(set(files)), key=files.count)
        return _reply("", calls=(ToolCall("r3", "read_file", json.dumps({"path": busiest})),))
    matches = len(results[1].content.splitlines())
    paragraph = results[2].content.split("\n\n")[1]
    idea = " ".join(paragraph.split()).split(". ")[0].split("; ")[0]
    return _reply(f"{matches} lines mention nurseries; the main idea: {idea}")


def reviewer(request: ModelRequest) -> ScriptItem:
    review = {
        "findings": [
            {"item": "verify the ledger after every run", "priority": "high",
             "why": "it makes every other claim checkable"},
            {"item": "tag every event with its AgentPath", "priority": "medium",
             "why": "the tree view and the audit need it"},
            {"item": "bound the queue", "priority": "medium",
             "why": "memory stays flat under load"},
        ],
        "most_important": "Verifying the ledger after every run matters most",
    }
    answer = ToolCall("v1", FINAL_RESULT, json.dumps(review))
    return _reply("", calls=(answer,), tokens=30)


def demo_specs() -> SpecFile:
    """The demo's agents, each on its own scripted model."""
    read, listing, grep, _write = workspace_tools(SAMPLE)
    specs = (
        Spec("coordinator", "Splits a job among subagents and merges their answers.",
             model=_model(coordinator), system_prompt="You coordinate."),
        Spec("researcher", "Explains concepts; has claims fact-checked.",
             model=_model(researcher)),
        Spec("fact_checker", "Checks one claim.", model=_model(fact_checker)),
        Spec("reader", "Reads the workspace with read-only tools.",
             model=_model(reader), tools=(listing, grep, read)),
        Spec("reviewer", "Reviews a plan; answers with a typed Review.",
             model=_model(reviewer), output_type=Review),
    )
    return SpecFile(
        source="<demo>",
        specs=specs,
        pool_tools={
            "coordinator": ("subagent", "subagent_results"),
            "researcher": ("subagent",),
        },
        pool={"max_concurrent": 4, "max_depth": 3},
        defaults=Defaults(agent_id="demo"),
        budget=BUDGET,
    )
