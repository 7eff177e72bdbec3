"""Property test of background delegation (issue 6): random delegation trees with
waited and background children, critical flags, parent end times, fan-out limits,
timeouts and cancels, under the mock clock.

Invariants: every background child's result is delivered into its live parent run
(``result_delivered``) or emitted as an orphan (``task_orphaned``), exactly once, and
never both; a delivered result matches what the child produced; only a hard abort
(of the pool, a task, or an ancestor) cancels a critical child; a parent resolves
after the non-critical children its end cancelled; tree usage adds up; nothing runs
after the pool block exits.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict

import attrs
import pytest
import trio
import trio.testing
from hypothesis import event as label
from hypothesis import given
from hypothesis import strategies as st

from agentcore import Message, ModelRequest, ModelResponse, Tool, ToolCall, Usage
from subagent import (
    Event,
    Pool,
    Spec,
    Stream,
    SubagentError,
    SubagentResultsTool,
    SubagentTool,
    Task,
    TaskStatus,
    open_pool,
)

from .helpers import all_tasks


@attrs.frozen
class Child:
    node: Node
    wait: bool
    critical: bool


@attrs.frozen
class Node:
    """One run: each model call takes ``delay``; it starts its children in order, then
    (if ``collect``) waits for its background results, then answers after ``end``."""

    id: int
    delay: float
    end: float
    collect: bool
    children: tuple[Child, ...]


def draw_node(data: st.DataObject, ids: itertools.count[int], depth: int, budget: list[int]
              ) -> Node:
    node_id = next(ids)
    delay = data.draw(st.sampled_from([0.0, 0.5, 1.0, 3.0]))
    end = data.draw(st.sampled_from([0.0, 1.0, 2.0, 6.0]))
    collect = data.draw(st.booleans())
    children: list[Child] = []
    if depth < 3:
        for _ in range(data.draw(st.integers(0, min(3, budget[0])))):
            if budget[0] == 0:
                break
            budget[0] -= 1
            children.append(Child(draw_node(data, ids, depth + 1, budget),
                                  data.draw(st.booleans()), data.draw(st.booleans())))
    return Node(node_id, delay, end, collect, tuple(children))


class PlanModel:
    """Plays the plan; one token of usage per call."""

    def __init__(self, nodes: dict[int, Node]) -> None:
        self.nodes = nodes
        self.exited = False

    async def complete(self, request: ModelRequest) -> ModelResponse:
        assert not self.exited, "a model call after the pool block exited"
        node = self.nodes[int(request.messages[1].content.removeprefix("node "))]
        await trio.sleep(node.delay)
        turn = sum(1 for m in request.messages if m.role == "assistant")
        usage = Usage(1, 0)
        if turn < len(node.children):
            child = node.children[turn]
            arguments = {"agent": "k" if child.critical else "w",
                         "task": f"node {child.node.id}", "wait": child.wait}
            call = ToolCall(f"n{node.id}-{turn}", "subagent", json.dumps(arguments))
            return ModelResponse(Message("assistant", tool_calls=(call,)), "tool_calls", usage)
        if turn == len(node.children) and node.collect:
            call = ToolCall(f"n{node.id}-r", "subagent_results", "{}")
            return ModelResponse(Message("assistant", tool_calls=(call,)), "tool_calls", usage)
        await trio.sleep(node.end)
        return ModelResponse(Message("assistant", f"done {node.id}"), "stop", usage)


def ancestors(task: Task) -> list[Task]:
    found: list[Task] = []
    while task.parent is not None:
        task = task.parent
        found.append(task)
    return found


@pytest.mark.slow
@given(st.data())
def test_every_background_result_is_delivered_or_orphaned_once(data: st.DataObject) -> None:
    ids = itertools.count(1)
    budget = [data.draw(st.integers(0, 8), label="children budget")]
    roots = [draw_node(data, ids, 1, budget)
             for _ in range(data.draw(st.integers(1, 3), label="roots"))]
    max_concurrent = data.draw(st.integers(1, 4), label="max_concurrent")
    max_children = data.draw(st.integers(1, 3), label="max_children")
    children_timeout = data.draw(st.sampled_from([1.0, 5.0, 30.0]), label="children_timeout")
    timeout = data.draw(st.sampled_from([None, None, 4.0, 9.0]), label="timeout")
    cancel = data.draw(st.sampled_from(["none", "none", "pool", "task"]), label="cancel")
    cancel_at = data.draw(st.sampled_from([0.5, 2.0, 5.0]), label="cancel_at")

    nodes: dict[int, Node] = {}
    stack = list(roots)
    while stack:
        node = stack.pop()
        nodes[node.id] = node
        stack.extend(c.node for c in node.children)
    model = PlanModel(nodes)
    stream = Stream(100_000)
    submitted: list[Task] = []
    pool_box: list[Pool] = []

    async def canceller(pool: Pool, scope: trio.CancelScope) -> None:
        with scope:
            await trio.sleep(cancel_at)
            if cancel == "pool":
                pool.cancel()
            else:
                submitted[0].cancel()

    root_outcomes: list[str] = []

    async def main() -> None:
        with trio.fail_after(100_000):
            async with trio.open_nursery() as outer:
                scope = trio.CancelScope()
                async with open_pool(max_concurrent=max_concurrent, max_depth=3,
                                     max_children=max_children,
                                     children_timeout=children_timeout,
                                     events=stream) as pool:
                    pool_box.append(pool)
                    tools: list[Tool] = [SubagentTool(pool), SubagentResultsTool(pool)]
                    pool.register(Spec("w", model=model, tools=tools, timeout=timeout))
                    pool.register(Spec("k", model=model, tools=tools, timeout=timeout,
                                       critical=True))
                    for root in roots:
                        submitted.append(await pool.submit("w", f"node {root.id}"))
                    if cancel != "none":
                        outer.start_soon(canceller, pool, scope)
                    for task in submitted:
                        try:
                            root_outcomes.append((await task.wait()).output)
                        except SubagentError as exc:
                            root_outcomes.append(type(exc).__name__)
                model.exited = True
                scope.cancel()
                stream.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    events: list[Event] = []
    while True:
        try:
            events.append(stream.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            break
    tasks = all_tasks(submitted)
    assert all(t.done for t in tasks)
    stats = pool_box[0].statistics()
    assert (stats.running, stats.queued, stats.holding_slots) == (0, 0, 0)
    assert stats.accepted == len(tasks)
    assert {e.path for e in events} <= {t.path for t in tasks}
    if cancel == "none" and timeout is None:
        assert root_outcomes == [f"done {root.id}" for root in roots]

    position: dict[tuple[tuple[str, ...], str], int] = {}
    for index, event in enumerate(events):
        position.setdefault((event.path, str(event.kind)), index)
    reports: dict[tuple[str, ...], list[Event]] = defaultdict(list)
    for event in events:
        if event.kind == "result_delivered":
            assert event.child is not None
            reports[event.child].append(event)
        elif event.kind == "task_orphaned":
            reports[event.path].append(event)
    hard = cancel != "none"
    outcomes: Counter[str] = Counter()
    for task in tasks:
        parent = task.parent
        background = task._deliver_to is not None
        found = reports[task.path]
        assert len(found) == (1 if background else 0), (task, found)
        if parent is None or not background:
            continue
        [report] = found
        outcomes[str(report.kind)] += 1
        if task.status is TaskStatus.finished:
            assert (report.output, report.error) == (task._output, None)
        else:
            assert report.output is None and report.error
        if report.kind == "result_delivered":
            assert report.path == parent.path
            assert position[(parent.path, "agent_end")] > events.index(report)
        if task.spec.critical and task.status is TaskStatus.cancelled:
            # Only a hard abort reaches a critical task: of the pool, a root, or an
            # ancestor (a non-critical background child its parent's end cancelled).
            assert hard or any(a._scope.cancel_called for a in ancestors(task)), (
                f"{task} cancelled without a hard abort")
        if not task.spec.critical and parent.status is not TaskStatus.cancelled:
            # A graceful end of the parent cancels it, and the parent resolves after.
            end = "task_cancelled" if task.status is TaskStatus.cancelled else "task_finished"
            assert position[(task.path, end)] < position[(parent.path, "task_finished")]
    for task in tasks:
        subtree = all_tasks([task])
        terminal = [e for e in events if e.path == task.path
                    and e.kind in ("task_finished", "task_cancelled")]
        if terminal and terminal[-1].tree_usage is not None:
            assert terminal[-1].tree_usage == task.tree_usage
        if not any(t.spec.critical for t in subtree[1:]):
            total = sum((t._summary.usage for t in subtree if t._summary is not None), Usage())
            assert task.tree_usage == total, task
    label(f"background reports: {sorted(outcomes.items())}")
    label(f"statuses: {sorted({str(t.status) for t in tasks})}")
