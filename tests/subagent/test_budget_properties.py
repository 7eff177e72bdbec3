"""Budgets over random delegation trees (issue 22): the spend never passes the limit by
more than one model call's usage per task running when it was reached (the bound in
``subagent.Budget``'s docstring), and every task ends."""

from __future__ import annotations

import json

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from agentcore import Message, ModelRequest, ModelResponse, ToolCall, Usage
from agentcore.testing import RecordingTool
from subagent import (
    Budget,
    BudgetExceeded,
    Spec,
    Stream,
    SubagentResultsTool,
    SubagentTool,
    Task,
    TaskStatus,
    open_pool,
)

from .helpers import all_tasks


@attrs.define
class Plan:
    """One agent of the tree: what its run does, turn by turn, then answers."""

    name: str
    steps: list[tuple[str, str, bool]]  # ("delegate", child, wait) | ("echo"|"wait_all", "", _)
    tokens: int
    delay: float
    critical: bool


class PlannedModel:
    """Follows a Plan: one step per model call (a summary when offered no tools), each
    call ``delay`` virtual seconds, each answer ``tokens`` tokens; records what it spent."""

    def __init__(self, plan: Plan, spent: list[int]) -> None:
        self.plan = plan
        self.spent = spent

    async def complete(self, request: ModelRequest) -> ModelResponse:
        plan = self.plan
        step = sum(m.role == "assistant" for m in request.messages)
        await trio.sleep(plan.delay)
        usage = Usage(plan.tokens - 1, 1)
        message = Message("assistant", f"{plan.name}: answer")
        if request.tools and step < len(plan.steps):
            kind, child, wait = plan.steps[step]
            call_id = f"{plan.name}-{step}"
            if kind == "delegate":
                arguments = json.dumps({"agent": child, "task": "go", "wait": wait})
                call = ToolCall(call_id, "subagent", arguments)
            elif kind == "wait_all":
                call = ToolCall(call_id, "subagent_results", "{}")
            else:
                call = ToolCall(call_id, "echo", "{}")
            message = Message("assistant", tool_calls=(call,))
        self.spent.append(plan.tokens)
        reason = "tool_calls" if message.tool_calls else "stop"
        return ModelResponse(message, reason, usage)


@st.composite
def trees(draw: st.DrawFn) -> list[Plan]:
    plans: list[Plan] = []

    def node(depth: int) -> str:
        name = f"n{len(plans)}"
        plan = Plan(name, [], draw(st.integers(1, 60)), draw(st.sampled_from([0, 0.5, 1, 2])),
                    draw(st.booleans()))
        plans.append(plan)
        children = draw(st.integers(0, 2)) if depth < 3 else 0
        for _ in range(children):
            plan.steps.append(("delegate", node(depth + 1), draw(st.booleans())))
        plan.steps.extend([("echo", "", False)] * draw(st.integers(0, 3)))
        if any(not wait for kind, _, wait in plan.steps if kind == "delegate") and draw(
            st.booleans()
        ):
            plan.steps.append(("wait_all", "", False))
        draw(st.randoms()).shuffle(plan.steps)
        return name

    node(1)
    return plans


@pytest.mark.slow
@given(st.data())
def test_spend_stays_within_the_bound_and_every_task_ends(data: st.DataObject) -> None:
    plans = data.draw(trees())
    limit_kind = data.draw(st.sampled_from(["tokens", "model_calls"]))
    limit = data.draw(st.integers(1, 400) if limit_kind == "tokens" else st.integers(1, 15))
    budget = Budget(**{limit_kind: limit}, grace=data.draw(st.sampled_from([1.0, 5.0, 30.0])))
    on_pool = data.draw(st.booleans())
    spent: list[int] = []
    calls: list[int] = []
    stream = Stream(100_000)
    root: list[Task] = []

    async def main() -> None:
        with trio.fail_after(100_000):  # virtual: a hang fails instead of hanging
            async with open_pool(events=stream, budget=budget if on_pool else None) as pool:
                tools = (SubagentTool(pool), SubagentResultsTool(pool), RecordingTool("echo"))
                for plan in plans:
                    own = budget if plan is plans[0] and not on_pool else None
                    model = PlannedModel(plan, spent)
                    pool.register(Spec(plan.name, model=model, tools=tools,
                                       critical=plan.critical, budget=own))
                root.append(await pool.submit(plans[0].name, "go"))
        stream.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    calls.extend(spent)
    events = list(stream.receive_nowait() for _ in range(stream.statistics().buffered))
    exceeded = [e.budget for e in events if e.kind == "budget_exceeded"]
    total = sum(calls) if limit_kind == "tokens" else len(calls)
    largest = max(calls, default=0) if limit_kind == "tokens" else 1
    tasks = all_tasks(root)
    assert all(task.done for task in tasks)
    if not exceeded:
        assert total < limit
        # (a background child that is not critical is cancelled when its parent ends)
        assert all(task.status is not TaskStatus.failed for task in tasks)
        return
    (report,) = exceeded
    assert report is not None
    assert report.spent is not None and report.spent >= limit
    assert 1 <= report.running <= len(tasks)
    assert total <= limit + report.running * largest
    if root[0].status is TaskStatus.failed:
        assert isinstance(root[0]._failure(), BudgetExceeded)
