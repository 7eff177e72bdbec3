"""Budgets over a delegation tree (issue 22 item 1): scripted models whose usage is
known exactly, so each test knows which call reaches the limit and what is spent."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from agentcore import Message, ModelRequest, ModelResponse, ToolCall, Usage
from agentcore.models import ModelPrices
from agentcore.models._prices import priced
from agentcore.testing import Blocked, Delayed, RecordingTool, ScriptedModel, ScriptItem
from ledger import MemorySink
from subagent import (
    Budget,
    BudgetExceeded,
    Defaults,
    Pool,
    Spec,
    SpecError,
    Stream,
    SubagentResultsTool,
    SubagentTool,
    TaskFailed,
    TaskStatus,
    open_pool,
)

from .helpers import drain

Clock = trio.testing.MockClock

#: Every scripted call's usage: 100 tokens.
CALL = Usage(90, 10)


def delegate(agent: str, task: str = "go", *, wait: bool = True, id: str = "d") -> Message:
    arguments = json.dumps({"agent": agent, "task": task, "wait": wait})
    return Message("assistant", tool_calls=(ToolCall(id, "subagent", arguments),))


def echo(id: str = "e") -> Message:
    return Message("assistant", tool_calls=(ToolCall(id, "echo", "{}"),))


def scripted(*items: ScriptItem) -> ScriptedModel:
    return ScriptedModel(list(items), usage=CALL)


def register_tree(pool: Pool, a: ScriptedModel, b: ScriptedModel, c: ScriptedModel,
                  budget: Budget | None = None) -> None:
    delegation = (SubagentTool(pool), SubagentResultsTool(pool))
    pool.register(Spec("a", model=a, tools=delegation, budget=budget))
    pool.register(Spec("b", model=b, tools=delegation))
    pool.register(Spec("c", model=c, tools=(RecordingTool("echo"),)))


# -- the value -------------------------------------------------------------------------


def test_budget_is_validated() -> None:
    assert Budget(tokens=10).limits() == (("tokens", 10),)
    assert Budget(cost=0.5, tasks=3).limits() == (("cost", 0.5), ("tasks", 3))
    cases = [
        ({}, "a Budget needs at least one limit: give tokens, input_tokens, output_tokens, "
             "cost, model_calls or tasks"),
        ({"tokens": 0}, "Budget tokens must be an integer of at least 1 or None, not 0"),
        ({"tasks": True}, "Budget tasks must be an integer of at least 1 or None, not True"),
        ({"model_calls": 2.0},
         "Budget model_calls must be an integer of at least 1 or None, not 2.0"),
        ({"cost": 0}, "Budget cost must be a positive finite number of US dollars or None, "
                      "not 0"),
        ({"cost": float("inf")}, "Budget cost must be a positive finite number of US "
                                 "dollars or None, not inf"),
        ({"tokens": 5, "warn_at": 0}, "Budget warn_at must be a fraction above 0 and at "
                                      "most 1, not 0"),
        ({"tokens": 5, "warn_at": 1.5}, "Budget warn_at must be a fraction above 0 and at "
                                        "most 1, not 1.5"),
        ({"tokens": 5, "grace": float("nan")}, "Budget grace must be a positive finite "
                                               "number of seconds, not nan"),
    ]
    for fields, message in cases:
        with pytest.raises(SpecError) as info:
            Budget(**fields)  # type: ignore[arg-type]
        assert str(info.value) == message
    with pytest.raises(TypeError):
        Budget(10)  # type: ignore[misc]


async def test_spec_budget_is_inherited_from_the_defaults() -> None:
    own, inherited = Budget(tokens=5), Budget(model_calls=3)
    defaults = Defaults(model=scripted("x"), budget=inherited)
    assert Spec("a", budget=own).inherit(defaults).budget is own
    assert Spec("a").inherit(defaults).budget is inherited
    assert Spec("a").inherit(Defaults(model=scripted("x"))).budget is None
    with pytest.raises(SpecError) as info:
        Spec("a", budget={"tokens": 5}).inherit(defaults)  # type: ignore[arg-type]
    assert str(info.value) == "spec 'a': budget must be a subagent.Budget, not dict"


# -- a 3-level tree stops at the exact call ---------------------------------------------


async def test_a_token_budget_stops_a_three_level_tree_at_the_call_that_reaches_it(
    autojump_clock: Clock,
) -> None:
    # a -> b -> c, every call 100 tokens, a's budget 450: a1 b1 c1 c2 give 400, c3
    # reaches 500. c made the call (no summary for it: its next call is refused);
    # b and a, waiting in a tool call then, each get one summary call.
    a = scripted(delegate("b"), "a: summary")
    b = scripted(delegate("c"), "b: summary")
    c = scripted(echo("e1"), echo("e2"), echo("e3"), "c: never")
    stream = Stream(1000)
    sink = MemorySink()
    async with open_pool(events=stream, defaults=Defaults(audit=sink)) as pool:
        register_tree(pool, a, b, c, Budget(tokens=450))
        task = await pool.submit("a", "go")
        with pytest.raises(BudgetExceeded) as info:
            await task.wait()
    stream.close()
    events = await drain(stream)
    error = info.value
    assert str(error) == (
        "task a/0001 spent its budget: tokens 500 of 450, reached by a model call of "
        "a/0001/b/0002/c/0003"
    )
    assert isinstance(error, TaskFailed)
    assert (error.path, error.owner, error.limit, error.allowed, error.spent, error.by) == (
        ("a/0001",), ("a/0001",), "tokens", 450, 500, ("a/0001", "b/0002", "c/0003"),
    )
    assert (len(a.requests), len(b.requests), len(c.requests)) == (2, 2, 3)
    assert task.status is TaskStatus.failed
    assert task.tree_usage.total_tokens == 700  # 500, then b's and a's summaries
    b_task = task.children[0]
    c_task = b_task.children[0]
    assert b_task.status is TaskStatus.finished
    assert (await b_task.wait()).output == "b: summary"
    assert c_task.status is TaskStatus.failed
    with pytest.raises(TaskFailed) as refused:
        await c_task.wait()
    assert str(refused.value) == (
        "task a/0001/b/0002/c/0003 failed: BudgetExceeded: task a/0001 spent its budget: "
        "tokens 500 of 450, reached by a model call of a/0001/b/0002/c/0003"
    )
    warned = [e for e in events if e.kind == "budget_warning"]
    exceeded = [e for e in events if e.kind == "budget_exceeded"]
    assert [e.error for e in warned] == [
        "task a/0001 used 80% of its budget: tokens 400 of 450, reached by a model call of "
        "a/0001/b/0002/c/0003"
    ]
    assert [(e.path, e.error) for e in exceeded] == [(("a/0001",), str(error))]
    report = exceeded[0].budget
    assert report is not None
    assert (report.running, report.spend.tokens, report.spend.model_calls) == (3, 500, 5)
    assert report.spend.tasks == 3
    entries = [(r.kind, r.path, r.error) for r in sink.entries
               if r.kind.startswith("budget_")]
    assert entries == [
        ("budget_warning", ("a/0001",), None),
        ("budget_exceeded", ("a/0001",), str(error)),
    ]
    ends = {e.path[-1]: e.summary for e in events if e.kind == "task_finished"}
    assert ends["a/0001"] is not None and ends["a/0001"].error == str(error)
