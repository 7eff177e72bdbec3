"""Property tests of the pool under the mock clock (SPEC 6): random limits, workloads,
delegation trees, failures, timeouts, cancels and streams.

Invariants: limits never exceeded; every task resolves exactly once; each run's events
arrive exactly once and in order (agent_start first, agent_end last); statistics add
up; nothing runs after the pool block exits; no deadlock.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict

import attrs
import pytest
import trio
import trio.testing
from hypothesis import event as label
from hypothesis import given
from hypothesis import strategies as st

from agentcore import Message, ModelError, ModelRequest, ModelResponse, ToolCall
from subagent import (
    Event,
    Pool,
    PoolClosedError,
    Spec,
    Stream,
    SubagentTool,
    Task,
    TaskCancelled,
    TaskFailed,
    TaskStatus,
    TaskTimeout,
    open_pool,
)

from .helpers import all_tasks


@attrs.frozen
class Node:
    """One run of the plan: its model calls each take ``delay``; it delegates to its
    children in order (``None``: an unknown agent), then answers or fails."""

    id: int
    delay: float
    fail: bool
    children: tuple[Node | None, ...]


def draw_tree(data: st.DataObject, ids: itertools.count[int], depth: int, max_depth: int,
              budget: list[int]) -> Node:
    node_id = next(ids)
    delay = data.draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]))
    fail = data.draw(st.integers(0, 4)) == 0
    children: list[Node | None] = []
    if depth < max_depth:
        for _ in range(data.draw(st.integers(0, min(2, budget[0])))):
            if budget[0] == 0:
                break
            budget[0] -= 1
            if data.draw(st.integers(0, 5)) == 0:
                children.append(None)
            else:
                children.append(draw_tree(data, ids, depth + 1, max_depth, budget))
    return Node(node_id, delay, fail, tuple(children))


# After each kind, the kinds a run may deliver next (agent_end may always end it early).
NEXT = {
    None: {"agent_start"},
    "agent_start": {"turn_start"},
    "turn_start": {"model_request"},
    "model_request": {"model_response", "error"},
    "model_response": {"tool_start", "turn_start"},
    "tool_start": {"gate_decision"},
    "gate_decision": {"tool_end"},
    "tool_end": {"tool_start", "turn_start"},
    "error": set(),
}
POOL_KINDS = {"task_queued", "task_started", "task_finished", "task_cancelled"}


class TreeModel:
    """Plays the plan and checks the pool's limits at every model call."""

    def __init__(self, nodes: dict[int, Node], pool_box: list[Pool]) -> None:
        self.nodes = nodes
        self.pool_box = pool_box
        self.active = 0
        self.exited = False
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        assert not self.exited, "a model call after the pool block exited"
        pool = self.pool_box[0]
        check_statistics(pool)
        node = self.nodes[int(request.messages[1].content.removeprefix("node "))]
        self.active += 1
        self.calls += 1
        assert self.active <= pool.max_concurrent
        try:
            await trio.sleep(node.delay)
        finally:
            self.active -= 1
        done = sum(1 for m in request.messages if m.role == "tool")
        if done < len(node.children):
            child = node.children[done]
            arguments = {"agent": "w", "task": f"node {child.id}"} if child else {
                "agent": "nope", "task": "x"}
            call = ToolCall(f"n{node.id}-{done}", "subagent", json.dumps(arguments))
            return ModelResponse(Message("assistant", tool_calls=(call,)), "tool_calls")
        if node.fail:
            raise ModelError(f"node {node.id} failed")
        return ModelResponse(Message("assistant", f"done {node.id}"))


def check_statistics(pool: Pool) -> None:
    s = pool.statistics()
    assert s.accepted == s.queued + s.running + s.finished + s.failed + s.cancelled
    assert 0 <= s.holding_slots <= min(s.max_concurrent, s.running)
    assert s.queued <= s.max_queued


def check_run_events(path: tuple[str, ...], events: list[Event], status: TaskStatus,
                     complete: bool) -> None:
    assert len({id(e) for e in events}) == len(events), "an event delivered twice"
    kinds = [str(e.kind) for e in events]
    run_kinds = [k for k in kinds if k not in POOL_KINDS]
    pool_kinds = [k for k in kinds if k in POOL_KINDS]
    turns = [e.event.turn for e in events if e.event is not None]
    assert turns == sorted(turns)
    assert run_kinds.count("agent_start") <= 1
    assert run_kinds.count("agent_end") <= 1
    if "agent_start" in run_kinds:
        assert run_kinds[0] == "agent_start"
    if "agent_end" in run_kinds:
        assert run_kinds[-1] == "agent_end"
    if not complete:
        return
    if run_kinds:
        assert run_kinds[0] == "agent_start"
        assert run_kinds[-1] == "agent_end"
    previous: str | None = None
    for kind in run_kinds[:-1]:
        assert kind in NEXT[previous], f"{path}: {kind} after {previous} in {run_kinds}"
        previous = kind
    terminal = "task_cancelled" if status is TaskStatus.cancelled else "task_finished"
    assert pool_kinds[-1:] == [terminal], f"{path}: {kinds}"
    assert kinds[-1] == terminal
    assert pool_kinds[:-1] in ([], ["task_queued"], ["task_queued", "task_started"])
    if run_kinds:
        assert pool_kinds[:-1] == ["task_queued", "task_started"]
        assert kinds.index("task_started") < kinds.index("agent_start")


@pytest.mark.slow
@given(st.data())
def test_random_workloads(data: st.DataObject) -> None:
    max_concurrent = data.draw(st.integers(1, 4), label="max_concurrent")
    max_queued = data.draw(st.integers(1, 4), label="max_queued")
    max_depth = data.draw(st.integers(1, 3), label="max_depth")
    timeout = data.draw(st.sampled_from([None, None, 2.0, 5.0, 12.0]), label="timeout")
    buffer = data.draw(st.sampled_from([None, 0, 1, 3, 100]), label="buffer")
    overflow = data.draw(st.sampled_from(["block", "block", "drop_newest"]), label="overflow")
    ids = itertools.count(1)
    budget = [data.draw(st.integers(0, 8), label="nested budget")]
    roots = [draw_tree(data, ids, 1, max_depth, budget)
             for _ in range(data.draw(st.integers(0, 6), label="roots"))]
    cancel = data.draw(st.sampled_from(["none", "none", "pool", "task"]), label="cancel")
    cancel_at = data.draw(st.sampled_from([0.0, 0.5, 1.0, 2.5, 4.0, 7.0]), label="cancel_at")
    cancel_index = data.draw(st.integers(0, max(0, len(roots) - 1)), label="cancel_index")

    nodes: dict[int, Node] = {}
    stack = list(roots)
    while stack:
        node = stack.pop()
        nodes[node.id] = node
        stack.extend(c for c in node.children if c is not None)

    stream = None if buffer is None else Stream(buffer, overflow=overflow)  # type: ignore[arg-type]
    received: list[Event] = []
    pool_box: list[Pool] = []
    model = TreeModel(nodes, pool_box)
    submitted: list[Task] = []
    outcomes: dict[tuple[str, ...], list[str]] = defaultdict(list)

    async def consume() -> None:
        assert stream is not None
        async for event in stream:
            received.append(event)

    canceller_scope = trio.CancelScope()

    async def canceller(pool: Pool) -> None:
        with canceller_scope:
            await trio.sleep(cancel_at)
            if cancel == "pool":
                pool.cancel()
            elif cancel_index < len(submitted):
                submitted[cancel_index].cancel()

    async def outcome(task: Task) -> str:
        try:
            result = await task.wait()
        except TaskFailed as exc:
            assert isinstance(exc.__cause__, ModelError)
            return "failed"
        except TaskTimeout:
            return "timed_out"
        except TaskCancelled:
            return "cancelled"
        assert result.path == task.path
        return result.output

    async def main() -> None:
        with trio.fail_after(100_000):
            async with trio.open_nursery() as outer:
                if stream is not None:
                    outer.start_soon(consume)
                async with open_pool(max_concurrent=max_concurrent, max_queued=max_queued,
                                     max_depth=max_depth, events=stream) as pool:
                    pool_box.append(pool)
                    pool.register(Spec("w", model=model, tools=[SubagentTool(pool)],
                                       timeout=timeout))
                    with trio.CancelScope() as cancel_scope:
                        if cancel != "none":
                            outer.start_soon(canceller, pool)
                        for root in roots:
                            try:
                                submitted.append(await pool.submit("w", f"node {root.id}"))
                            except PoolClosedError:
                                assert cancel == "pool"
                        for task in submitted:
                            outcomes[task.path].append(await outcome(task))
                    assert not cancel_scope.cancelled_caught
                model.exited = True
                canceller_scope.cancel()
                if stream is not None:
                    stream.close()

        tasks = all_tasks(submitted)
        deepest = max((len(t.path) for t in tasks), default=0)
        label(f"tasks: {min(len(tasks), 10)}, deepest: {deepest}")
        label(f"statuses: {sorted({str(t.status) for t in tasks})}")
        assert all(t.done for t in tasks)
        for task in submitted:
            outcomes[task.path].append(await outcome(task))
            assert len(set(outcomes[task.path])) == 1, "a task resolved two ways"
        stats = pool_box[0].statistics()
        check_statistics(pool_box[0])
        assert (stats.queued, stats.running, stats.holding_slots) == (0, 0, 0)
        assert stats.accepted == len(tasks) == len({t.path for t in tasks})
        statuses = [t.status for t in tasks]
        assert stats.finished == statuses.count(TaskStatus.finished)
        assert stats.failed == statuses.count(TaskStatus.failed) + statuses.count(
            TaskStatus.timed_out)
        assert stats.cancelled == statuses.count(TaskStatus.cancelled)
        if cancel == "none" and timeout is None:
            for root, task in zip(roots, submitted, strict=True):
                assert outcomes[task.path][0] == ("failed" if root.fail else f"done {root.id}")
        if stream is not None:
            by_path: dict[tuple[str, ...], list[Event]] = defaultdict(list)
            for event in received:
                by_path[event.path].append(event)
            assert set(by_path) <= {t.path for t in tasks}
            complete = overflow == "block"
            if complete:
                assert set(by_path) == {t.path for t in tasks}
            for task in tasks:
                check_run_events(task.path, by_path[task.path], task.status, complete)
                expected_call = None if task.parent is None else task.call_id
                assert all(e.call_id == expected_call for e in by_path[task.path])
                assert (task.call_id is None) == (task.parent is None)
            s = stream.statistics()
            assert s.sent == len(received)
            assert s.dropped_after_close == 0

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
