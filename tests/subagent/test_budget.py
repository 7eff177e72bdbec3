"""Budgets over a delegation tree (issue 22 item 1): scripted models whose usage is
known exactly, so each test knows which call reaches the limit and what is spent."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest
import trio
import trio.testing

from agentcore import Message, ModelRequest, ModelResponse, ToolCall, Usage
from agentcore.models import ModelPrices
from agentcore.models._prices import priced
from agentcore.testing import Delayed, RecordingTool, ScriptedModel, ScriptItem
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
        Budget(10)  # type: ignore[call-arg]


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
    assert [e.budget.message() for e in warned if e.budget is not None] == [
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


def wait_all(id: str = "w") -> Message:
    return Message("assistant", tool_calls=(ToolCall(id, "subagent_results", "{}"),))


# -- background children and orphans count ---------------------------------------------


async def test_background_children_count(autojump_clock: Clock) -> None:
    # a starts b in the background and waits for it (200 tokens); b's call reaches
    # a's budget, and its answer is delivered; a summarises.
    a = scripted(delegate("b", wait=False), wait_all(), "a: summary")
    b = scripted(Delayed(1, "b: answer"))
    async with open_pool() as pool:
        register_tree(pool, a, b, scripted("x"), Budget(tokens=300))
        task = await pool.submit("a", "go")
        with pytest.raises(BudgetExceeded) as info:
            await task.wait()
    assert str(info.value) == (
        "task a/0001 spent its budget: tokens 300 of 300, reached by a model call of "
        "a/0001/b/0002"
    )
    # b's answer came with the call that reached it; a waited, then summarised.
    assert (len(a.requests), len(b.requests)) == (3, 1)
    assert (await task.children[0].wait()).output == "b: answer"


async def test_an_orphan_counts_in_the_budget_of_its_ended_parent(autojump_clock: Clock) -> None:
    # a ends after starting a critical b in the background; b, an orphan by then,
    # reaches a's budget, and its next call is refused.
    a = scripted(delegate("b", wait=False), "a: done")
    b = scripted(Delayed(5, echo("e1")), echo("e2"), "b: never")
    stream = Stream(1000)
    async with open_pool(events=stream) as pool:
        delegation = (SubagentTool(pool),)
        pool.register(Spec("a", model=a, tools=delegation, budget=Budget(tokens=350)))
        pool.register(Spec("b", model=b, tools=(RecordingTool("echo"),), critical=True))
        task = await pool.submit("a", "go")
        assert (await task.wait()).output == "a: done"
        child = task.children[0]
        with pytest.raises(TaskFailed) as info:
            await child.wait()
        assert trio.current_time() == 5
    stream.close()
    events = await drain(stream)
    text = ("task a/0001 spent its budget: tokens 400 of 350, reached by a model call of "
            "a/0001/b/0002")
    assert str(info.value) == f"task a/0001/b/0002 failed: BudgetExceeded: {text}"
    assert len(b.requests) == 2
    exceeded = [e for e in events if e.kind == "budget_exceeded"]
    assert [(e.path, e.error) for e in exceeded] == [(("a/0001",), text)]
    orphaned = [e for e in events if e.kind == "task_orphaned"]
    assert [e.error for e in orphaned] == [str(info.value)]


# -- the other limits --------------------------------------------------------------------


async def test_a_tasks_limit_refuses_the_submit_that_would_pass_it(autojump_clock: Clock) -> None:
    a = scripted(delegate("b", id="d1"), delegate("b", id="d2"), "a: summary")
    async with open_pool() as pool:
        register_tree(pool, a, scripted("b: one"), scripted("x"), Budget(tasks=2))
        task = await pool.submit("a", "go")
        with pytest.raises(BudgetExceeded) as info:
            await task.wait()
    text = "task a/0001 spent its budget: tasks 2 of 2, reached by a submit under a/0001"
    assert str(info.value) == text
    assert len(task.children) == 1
    # the refused delegation was an error result, then a summarised
    tool_results = [m.content for m in a.requests[2].messages if m.role == "tool"]
    assert tool_results[1] == f"tool 'subagent' failed: BudgetExceeded: {text}"


async def test_the_pool_budget_fails_every_running_root_and_refuses_submits(
    autojump_clock: Clock,
) -> None:
    first = ScriptedModel([Delayed(1, echo("e1")), Delayed(1, "x: summary")], usage=CALL)
    second = ScriptedModel([Delayed(1.5, echo("e1")), "y: never"], usage=CALL)
    stream = Stream(1000)
    sink = MemorySink()
    async with open_pool(budget=Budget(model_calls=2), events=stream,
                         defaults=Defaults(audit=sink)) as pool:
        pool.register(Spec("x", model=first, tools=(RecordingTool("echo"),)))
        pool.register(Spec("y", model=second, tools=(RecordingTool("echo"),)))
        x = await pool.submit("x", "go")
        y = await pool.submit("y", "go")
        text = ("the pool spent its budget: model_calls 2 of 2, reached by a model call of "
                "y/0002")
        for task in (x, y):
            with pytest.raises(BudgetExceeded) as info:
                await task.wait()
            assert str(info.value) == f"task {task.path[0]} stopped: {text}"
            assert info.value.owner == ()
        with pytest.raises(BudgetExceeded) as refused:
            await pool.submit("x", "again")
        assert str(refused.value) == text
    # y's call reached it at t=1.5, x's second call was in flight then: its last one
    assert (len(first.requests), len(second.requests)) == (2, 1)
    stream.close()
    events = await drain(stream)
    assert [(e.path, e.error) for e in events if e.kind == "budget_exceeded"] == [((), text)]
    assert [(r.kind, r.path) for r in sink.entries if r.kind.startswith("budget_")] == [
        ("budget_warning", ()), ("budget_exceeded", ())
    ]


async def test_a_nested_budget_stops_only_its_own_subtree(autojump_clock: Clock) -> None:
    a = scripted(delegate("b"), "a: fine")
    b = scripted(delegate("c"), "b: summary")
    c = scripted(echo("e1"), "c: answer")
    async with open_pool() as pool:
        delegation = (SubagentTool(pool),)
        pool.register(Spec("a", model=a, tools=delegation, budget=Budget(tokens=1000)))
        pool.register(Spec("b", model=b, tools=delegation, budget=Budget(tokens=250)))
        pool.register(Spec("c", model=c, tools=(RecordingTool("echo"),)))
        result = await (await pool.submit("a", "go")).wait()
    assert result.output == "a: fine"
    tool_results = [m.content for m in a.requests[1].messages if m.role == "tool"]
    assert tool_results == [
        "tool 'subagent' failed: BudgetExceeded: task a/0001/b/0002 spent its budget: "
        "tokens 300 of 250, reached by a model call of a/0001/b/0002/c/0003"
    ]
    assert result.tree_usage.total_tokens == 600


async def test_a_streaming_model_is_checked_too(autojump_clock: Clock) -> None:
    from agentcore.testing import StreamingScriptedModel

    model = StreamingScriptedModel([echo(), "never"], usage=CALL)
    async with open_pool() as pool:
        pool.register(Spec("a", model=model, tools=(RecordingTool("echo"),),
                           budget=Budget(output_tokens=10)))
        with pytest.raises(BudgetExceeded) as info:
            await (await pool.submit("a", "go")).wait()
    assert str(info.value) == (
        "task a/0001 spent its budget: output_tokens 10 of 10, reached by a model call of a/0001"
    )
    assert len(model.requests) == 1


# -- the grace period ----------------------------------------------------------------------


async def test_after_the_grace_period_a_stuck_child_is_cancelled(autojump_clock: Clock) -> None:
    stuck = RecordingTool("stuck", block=True)
    a = scripted(delegate("b", wait=False), Delayed(5, "a: done"))
    b = scripted(Message("assistant", tool_calls=(ToolCall("s", "stuck", "{}"),)), "b: never")
    async with open_pool() as pool:
        pool.register(Spec("a", model=a, tools=(SubagentTool(pool),),
                           budget=Budget(tokens=300, grace=10)))
        pool.register(Spec("b", model=b, tools=(stuck,), critical=True))
        task = await pool.submit("a", "go")
        with pytest.raises(BudgetExceeded):
            await task.wait()
        assert trio.current_time() == 5
        child = task.children[0]
        assert child.status is TaskStatus.running
        await child._done.wait()
        status: TaskStatus = child.status
        assert trio.current_time() == 15
    assert status is TaskStatus.cancelled


async def test_after_the_grace_period_a_stuck_owner_fails(autojump_clock: Clock) -> None:
    stuck = RecordingTool("stuck", block=True)
    calls = (ToolCall("d", "subagent", json.dumps({"agent": "b", "task": "go", "wait": False})),
             ToolCall("s", "stuck", "{}"))
    a = scripted(Message("assistant", tool_calls=calls), "a: never")
    b = scripted(Delayed(3, "b: answer"))
    async with open_pool() as pool:
        pool.register(Spec("a", model=a, tools=(SubagentTool(pool), stuck),
                           budget=Budget(tokens=200, grace=7)))
        pool.register(Spec("b", model=b))
        task = await pool.submit("a", "go")
        with pytest.raises(BudgetExceeded) as info:
            await task.wait()
        assert trio.current_time() == 10
    assert str(info.value) == (
        "task a/0001 spent its budget: tokens 200 of 200, reached by a model call of "
        "a/0001/b/0002"
    )
    assert len(a.requests) == 1


# -- cost ------------------------------------------------------------------------------


class Priced:
    """A scripted model with an id and a price table (as the adapters have): its
    answers carry their cost, unless ``unpriced`` (then the cost is missing)."""

    model = "m"
    prices: ClassVar[dict[str, ModelPrices]] = {"m": ModelPrices(input=1.0, output=10.0)}

    def __init__(self, *items: ScriptItem, unpriced: bool = False) -> None:
        self.inner = scripted(*items)
        self.unpriced = unpriced

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await self.inner.complete(request)
        return response if self.unpriced else priced(response, self.model, self.prices)


async def test_a_cost_budget_stops_at_the_call_that_reaches_it(autojump_clock: Clock) -> None:
    # each call: (90 * $1 + 10 * $10) per million = $0.00019
    model = Priced(echo("e1"), echo("e2"), echo("e3"), "never")
    async with open_pool() as pool:
        pool.register(Spec("a", model=model, tools=(RecordingTool("echo"),),
                           budget=Budget(cost=0.0005)))
        task = await pool.submit("a", "go")
        with pytest.raises(BudgetExceeded) as info:
            await task.wait()
    assert str(info.value) == (
        "task a/0001 spent its budget: cost $0.00057 of $0.0005, reached by a model call of "
        "a/0001"
    )
    assert task.tree_usage.cost == pytest.approx(0.00057)


async def test_a_call_without_a_cost_reaches_a_cost_budget(autojump_clock: Clock) -> None:
    model = Priced(echo("e1"), "never", unpriced=True)
    async with open_pool() as pool:
        pool.register(Spec("a", model=model, tools=(RecordingTool("echo"),),
                           budget=Budget(cost=1.0)))
        with pytest.raises(BudgetExceeded) as info:
            await (await pool.submit("a", "go")).wait()
    assert str(info.value) == (
        "task a/0001 spent its budget: cost unknown of $1, reached by a model call of a/0001"
    )
    assert info.value.spent is None


async def test_a_cost_budget_over_a_model_with_no_price_refuses_to_start() -> None:
    hint = ("has no price: give the model a price table (prices=), install subagent[prices], "
            "or budget tokens instead")
    async with open_pool() as pool:
        with pytest.raises(SpecError) as info:
            pool.register(Spec("a", model=scripted("x"), budget=Budget(cost=1.0)))
        assert str(info.value) == f"spec 'a': its budget limits cost, and its model " \
                                  f"'ScriptedModel' {hint}"
        assert "a" not in pool.specs
        pool.register(Spec("b", model=Priced("x"), budget=Budget(cost=1.0)))
    async with open_pool(budget=Budget(cost=1.0)) as pool:
        with pytest.raises(SpecError) as info:
            pool.register(Spec("a", model=scripted("x")))
        assert str(info.value) == f"spec 'a': the pool's budget limits cost, and its model " \
                                  f"'ScriptedModel' {hint}"


async def test_a_cost_budget_refuses_to_start_an_unpriced_child(autojump_clock: Clock) -> None:
    a = Priced(delegate("b"), "a: fine")
    async with open_pool() as pool:
        pool.register(Spec("a", model=a, tools=(SubagentTool(pool),), budget=Budget(cost=1.0)))
        pool.register(Spec("b", model=scripted("b")))
        assert (await (await pool.submit("a", "go")).wait()).output == "a: fine"
    tool_results = [m.content for m in a.inner.requests[1].messages if m.role == "tool"]
    assert tool_results == [
        "tool 'subagent' failed: SpecError: spec 'b': the budget of task a/0001 limits cost, "
        "and its model 'ScriptedModel' has no price: give the model a price table (prices=), "
        "install subagent[prices], or budget tokens instead"
    ]


def test_which_models_have_a_price() -> None:
    from agentcore.models import FallbackModel, RateLimited
    from subagent._cost._shell import model_priced

    assert model_priced(Priced("x"))
    assert model_priced(RateLimited(Priced("x"), requests_per_minute=60))
    assert model_priced(FallbackModel(Priced("x"), Priced("y")))
    assert not model_priced(FallbackModel(Priced("x"), scripted("y")))
    assert not model_priced(scripted("x"))


# -- specs files -------------------------------------------------------------------------


def test_budget_tables_in_a_specs_file() -> None:
    from subagent import specs_from_mapping

    specs = specs_from_mapping({
        "pool": {"max_depth": 3, "budget": {"tokens": 1000, "cost": 2, "warn_at": 0.5}},
        "defaults": {"model": "x", "budget": {"model_calls": 20}},
        "agents": {"a": {"budget": {"tasks": 4, "grace": 5}}, "b": {}},
    }, resolve_model=lambda text: scripted("x"))
    assert specs.budget == Budget(tokens=1000, cost=2.0, warn_at=0.5)
    assert specs.pool == {"max_depth": 3}
    assert specs.defaults.budget == Budget(model_calls=20)
    by_name = {spec.name: spec for spec in specs.specs}
    assert by_name["a"].budget == Budget(tasks=4, grace=5.0)
    assert by_name["b"].budget is None
    assert by_name["b"].inherit(specs.defaults).budget == Budget(model_calls=20)


@pytest.mark.parametrize(("data", "message"), [
    ({"pool": {"budget": 5}}, "[pool.budget]: must be a table, not an integer (5)"),
    ({"pool": {"budget": {}}}, "[pool.budget]: names no limit; give tokens, input_tokens, "
                               "output_tokens, cost, model_calls, tasks"),
    ({"pool": {"budget": {"dollars": 1}}},
     "[pool.budget] key 'dollars': unknown; the keys are tokens, input_tokens, output_tokens, "
     "cost, model_calls, tasks, warn_at, grace"),
    ({"defaults": {"budget": {"tokens": 0}}},
     "[defaults] field 'budget' key 'tokens': must be at least 1, not 0"),
    ({"agents": {"a": {"budget": {"tokens": 1.5}}}},
     "agent 'a' field 'budget' key 'tokens': must be an integer, not a number (1.5)"),
    ({"agents": {"a": {"budget": {"cost": "1"}}}},
     "agent 'a' field 'budget' key 'cost': must be a number, not a string ('1')"),
    ({"agents": {"a": {"budget": {"cost": 10**400}}}},
     "agent 'a' field 'budget' key 'cost': must be positive and finite, not inf"),
    ({"agents": {"a": {"budget": {"tokens": 9, "warn_at": 2}}}},
     "agent 'a' field 'budget' key 'warn_at': must be at most 1, not 2.0"),
    ({"agents": {"a": {"budget": {"tokens": 9, "grace": -1}}}},
     "agent 'a' field 'budget' key 'grace': must be positive and finite, not -1.0"),
    ({"agents": {"a": {"budget": {"tasks": True}}}},
     "agent 'a' field 'budget' key 'tasks': must be an integer, not a boolean (True)"),
])
def test_bad_budget_tables_are_refused(data: dict[str, object], message: str) -> None:
    from subagent import SpecFileError, specs_from_mapping

    data = {"agents": {"a": {"model": "x"}}, **data}
    with pytest.raises(SpecFileError) as info:
        specs_from_mapping(data, resolve_model=lambda text: scripted("x"),
                           source="s.toml")
    assert str(info.value) == f"s.toml: {message}"
