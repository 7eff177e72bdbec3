"""subagent.otel over random delegation trees: the span tree is the task tree."""

from __future__ import annotations

import json

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan

from agentcore import Message, ModelRequest, ModelResponse, ToolCall
from agentcore.testing import RecordingTool
from subagent import Spec, SubagentTool, open_pool
from subagent.otel import OtelStatistics, instrument

from .otel_helpers import memory_provider

#: The step that calls the failing tool.
BOOM = (-1, False)


@attrs.frozen
class Node:
    """One agent of the tree: what it does turn by turn, then its answer."""

    steps: tuple[tuple[int, bool], ...]  # (child index, wait), or BOOM
    delay: float


def trees() -> st.SearchStrategy[list[Node]]:
    # Nodes in order; a node's children have higher indices (at most 7 nodes).
    @st.composite
    def build(draw: st.DrawFn) -> list[Node]:
        count = draw(st.integers(1, 7))
        children: dict[int, list[int]] = {i: [] for i in range(count)}
        for child in range(1, count):
            children[draw(st.integers(max(0, child - 3), child - 1))].append(child)
        nodes = []
        for i in range(count):
            steps = [(c, draw(st.booleans())) for c in children[i]]
            if draw(st.booleans()):
                steps.insert(draw(st.integers(0, len(steps))), BOOM)
            nodes.append(Node(tuple(steps), draw(st.sampled_from([0.0, 0.5, 2.0]))))
        return nodes

    return build()


class TreeModel:
    """Plays one node: each model call takes the node's delay and asks for its next step."""

    def __init__(self, node: Node) -> None:
        self.node = node

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await trio.sleep(self.node.delay)
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done >= len(self.node.steps):
            return ModelResponse(Message("assistant", "done"))
        step = self.node.steps[done]
        if step == BOOM:
            call = ToolCall(f"boom-{done}", "boom", "{}")
        else:
            child, wait = step
            arguments = json.dumps({"agent": f"n{child}", "task": "go", "wait": wait})
            call = ToolCall(f"call-n{child}", "subagent", arguments)
        return ModelResponse(Message("assistant", tool_calls=(call,)), "tool_calls")


@pytest.mark.slow
@given(trees())
def test_the_span_tree_is_the_task_tree(nodes: list[Node]) -> None:
    provider, exporter = memory_provider()
    stats: list[OtelStatistics] = []

    async def main() -> None:
        async with open_pool() as pool:
            tool = SubagentTool(pool)
            boom = RecordingTool("boom", RuntimeError("no"))
            for i, node in enumerate(nodes):
                pool.register(Spec(f"n{i}", model=TreeModel(node), tools=(tool, boom)))
            handle = instrument(pool, tracer_provider=provider)
            task = await pool.submit("n0", "go")
            await task.wait()
        stats.append(handle.statistics())

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}

    def parent(span: ReadableSpan) -> ReadableSpan | None:
        return by_id.get(span.parent.span_id) if span.parent is not None else None

    def attribute(span: ReadableSpan | None, key: str) -> object:
        assert span is not None
        return (span.attributes or {}).get(key)

    invoked = {str(attribute(s, "gen_ai.agent.name")): s for s in spans
               if s.name.startswith("invoke_agent ")}
    calls = {str(attribute(s, "gen_ai.tool.call.id")): s for s in spans
             if s.name == "execute_tool subagent"}
    # Each task has exactly one invoke_agent span: the root, and each child whose
    # delegating call was made (a background child cancelled early may not get to
    # make its own calls).
    assert len(invoked) == sum(1 for s in spans if s.name.startswith("invoke_agent "))
    assert sorted(invoked) == sorted(
        ["n0"] + [f"n{k.removeprefix('call-n')}" for k in calls]
    )
    assert parent(invoked["n0"]) is None
    # A task that nothing cancels runs every step: the root, and the children it (or
    # such a task) waits for.
    sure = {0}
    for i, node in enumerate(nodes):
        if i in sure:
            sure.update(step[0] for step in node.steps if step != BOOM and step[1])
    assert {f"n{i}" for i in sure} <= set(invoked)
    for i, node in enumerate(nodes):
        for step in node.steps:
            if step == BOOM or f"call-n{step[0]}" not in calls:
                continue
            child, wait = step
            span = invoked[f"n{child}"]
            call = calls[f"call-n{child}"]
            assert parent(call) is invoked[f"n{i}"]
            if wait:
                assert parent(span) is call
                assert span.links == ()
            else:
                assert parent(span) is invoked[f"n{i}"]
                assert [link.context for link in span.links] == [call.context]
    failed = [s for s in spans if s.name == "execute_tool boom"]
    assert {attribute(s, "error.type") for s in failed} <= {"tool_error", "cancelled"}
    for s in spans:
        assert s.end_time is not None and s.start_time is not None
        assert s.start_time <= s.end_time
        above = parent(s)
        if above is not None:
            assert above.start_time is not None and above.start_time <= s.start_time
    assert len({s.context.trace_id for s in spans}) == 1
    assert stats == [OtelStatistics(len(spans), 0, 0, 0, False)]
