"""The cost of a delegation tree (issue 22 item 2): ``Task.tree_usage`` adds the
usages of every call of the tree, cost and cache tokens included, and an unpriced
call anywhere makes the tree's cost unknown rather than smaller."""

from __future__ import annotations

import json

import attrs
import trio.testing

from agentcore import Message, ModelResponse, ToolCall, Usage
from agentcore.testing import ScriptedModel
from subagent import Spec, SubagentTool, open_pool

# Costs that add exactly as floats, so the sums below are exact.
LEAD = Usage(1_000, 100, cache_read_tokens=600, model="gpt-4o-mini", cost=0.125)
REVIEWER = Usage(
    3_000, 300, cache_read_tokens=2_000, cache_write_tokens=500, model="claude-haiku-4-5",
    cost=0.5,
)


def delegate(task: str) -> Message:
    arguments = {"agent": "reviewer", "task": task, "wait": True}
    return Message("assistant", tool_calls=(ToolCall(task, "subagent", json.dumps(arguments)),))


def answer(message: Message, usage: Usage) -> ModelResponse:
    reason = "tool_calls" if message.tool_calls else "stop"
    return ModelResponse(message, reason, usage)


async def tree_usage(reviewer_usage: Usage) -> tuple[Usage, Usage]:
    lead = ScriptedModel(
        [
            answer(delegate("one"), LEAD),
            answer(delegate("two"), LEAD),
            answer(Message("assistant", "merged"), LEAD),
        ]
    )
    reviewer = ScriptedModel(
        lambda _: answer(Message("assistant", "found nothing"), reviewer_usage)
    )
    async with open_pool() as pool:
        pool.register(Spec("reviewer", model=reviewer))
        pool.register(Spec("lead", model=lead, tools=[SubagentTool(pool)]))
        task = await pool.submit("lead", "review")
        result = await task.wait()
    assert result.output == "merged"
    return result.summary.usage, result.tree_usage


async def test_tree_usage_sums_the_cost_of_two_models(
    autojump_clock: trio.testing.MockClock,
) -> None:
    own, tree = await tree_usage(REVIEWER)
    assert own == Usage(3_000, 300, cache_read_tokens=1_800, model="gpt-4o-mini", cost=0.375)
    assert tree == Usage(
        9_000,
        900,
        cache_read_tokens=1_800 + 4_000,
        cache_write_tokens=1_000,
        model="(mixed)",
        cost=0.375 + 1.0,
    )


async def test_an_unpriced_child_makes_the_tree_cost_unknown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    unpriced = attrs.evolve(REVIEWER, model="my-local-model", cost=None)
    own, tree = await tree_usage(unpriced)
    assert own.cost == 0.375
    assert (tree.input_tokens, tree.cost) == (9_000, None)

