"""Subagent lifecycle (SPEC 3.4, 3.5; issue 6): the idle watchdog, background
delegation and its delivery, orphans, critical children, the fan-out bound, the
caller's tool_timeout as a fallback bound, and the usage of a delegation tree."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from agentcore import Agent, Message, ModelRequest, ToolCall, Usage
from agentcore.testing import Blocked, Delayed, ScriptedModel, ScriptItem, tool_call_reply
from ledger import MemorySink
from subagent import (
    Defaults,
    Pool,
    Spec,
    Stream,
    SubagentResultsTool,
    SubagentTool,
    TaskCancelled,
    TaskStatus,
    TaskTimeout,
    open_pool,
)
from subagent._reply import RESULT_PREFIX

from .helpers import drain, kinds

Clock = trio.testing.MockClock


def start(agent: str, task: str, *, wait: bool = False, id: str | None = None) -> ToolCall:
    arguments = {"agent": agent, "task": task, "wait": wait}
    return ToolCall(id or f"start-{task}", "subagent", json.dumps(arguments))


def calls(*items: ToolCall) -> Message:
    return Message("assistant", tool_calls=items)


def results(id: str = "r", **arguments: object) -> ToolCall:
    return ToolCall(id, "subagent_results", json.dumps(arguments))


def sleeper(request: ModelRequest) -> ScriptItem:
    """A child that sleeps as many seconds as its task text says, then answers."""
    text = request.messages[-1].content
    return Delayed(float(text), f"slept {text}")


def delivered(path: list[str], output: str, agent: str = "c") -> Message:
    body = {"agent": agent, "path": path, "output": output}
    return Message("user", RESULT_PREFIX + json.dumps(body))


def register(pool: Pool, parent: ScriptedModel, **parent_fields: object) -> None:
    tools = [SubagentTool(pool), SubagentResultsTool(pool)]
    pool.register(Spec("p", model=parent, tools=tools, **parent_fields))  # type: ignore[arg-type]


# -- 2. the idle watchdog ------------------------------------------------------------


async def test_idle_watchdog_fires_exactly_idle_timeout_after_the_last_event(
    autojump_clock: Clock,
) -> None:
    model = ScriptedModel([Delayed(7, tool_call_reply("subagent", '{"agent": "c", "task": "4"}')),
                           Blocked("never")])
    stream = Stream(1000)
    async with open_pool(events=stream) as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper)))
        register(pool, model, idle_timeout=30)
        task = await pool.submit("p", "go")
        with pytest.raises(TaskTimeout) as info:
            await task.wait()
    assert str(info.value) == "task p/0001 was idle for 30s: no event within its idle_timeout"
    stream.close()
    events = await drain(stream)
    own = [e for e in events if e.path == ("p/0001",) and e.event is not None]
    # The model answered at 7, the child ran until 11, the tool ended at 11 and the
    # second model call (its model_request at 11 is the last event) never answered.
    assert str(own[-2].kind) == "model_request"
    assert trio.current_time() == 11 + 30
    assert events[-1].summary is not None
    assert events[-1].summary.error == "was idle for 30s: no event within its idle_timeout"


# -- 3. background delegation ---------------------------------------------------------


async def test_background_results_are_delivered_before_the_next_model_call(
    autojump_clock: Clock,
) -> None:
    parent = ScriptedModel([
        calls(start("c", "10"), start("c", "5")),
        calls(results()),
        "both in",
    ])
    stream = Stream(1000)
    audit = MemorySink()
    async with open_pool(events=stream, defaults=Defaults(audit=audit)) as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper)))
        register(pool, parent)
        task = await pool.submit("p", "go")
        result = await task.wait()
    assert trio.current_time() == 10.0
    assert result.output == "both in"
    second = parent.requests[1].messages
    assert [json.loads(m.content) for m in second[-2:]] == [
        {"agent": "c", "path": ["p/0001", "c/0002"], "status": "started"},
        {"agent": "c", "path": ["p/0001", "c/0003"], "status": "started"},
    ]
    third = parent.requests[2].messages
    assert list(third[-3:]) == [
        Message("tool", "2 results arrived (they follow as messages)", tool_call_id="r"),
        delivered(["p/0001", "c/0003"], "slept 5"),
        delivered(["p/0001", "c/0002"], "slept 10"),
    ]
    stream.close()
    events = await drain(stream)
    deliveries = [e for e in events if e.kind == "result_delivered"]
    assert [(e.path, e.child, e.output, e.error) for e in deliveries] == [
        (("p/0001",), ("p/0001", "c/0003"), "slept 5", None),
        (("p/0001",), ("p/0001", "c/0002"), "slept 10", None),
    ]
    parent_kinds = kinds(events, ("p/0001",))
    assert parent_kinds[parent_kinds.index("result_delivered") - 1] == "turn_start"
    assert "task_orphaned" not in kinds(events)
    entries = [e for e in audit.entries if e.kind == "result_delivered"]
    assert [(e.path, e.result, dict(e.data)) for e in entries] == [
        (("p/0001",), "slept 5", {"agent": "c", "child": "p/0001/c/0003"}),
        (("p/0001",), "slept 10", {"agent": "c", "child": "p/0001/c/0002"}),
    ]


async def test_a_result_arriving_during_the_last_answer_gets_another_model_call(
    autojump_clock: Clock,
) -> None:
    parent = ScriptedModel([calls(start("c", "1")), Delayed(5, "early answer"), "final"])
    async with open_pool() as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper)))
        register(pool, parent)
        result = await (await pool.submit("p", "go")).wait()
    assert result.output == "final"
    assert list(parent.requests[2].messages[-2:]) == [
        Message("assistant", "early answer"),
        delivered(["p/0001", "c/0002"], "slept 1"),
    ]
    assert result.summary.turns == 3


async def test_a_failed_background_child_delivers_its_error(autojump_clock: Clock) -> None:
    from agentcore import ModelError

    parent = ScriptedModel([calls(start("c", "x")), calls(results()), "noted"])
    async with open_pool() as pool:
        pool.register(Spec("c", model=ScriptedModel([ModelError("quota")])))
        register(pool, parent)
        await (await pool.submit("p", "go")).wait()
    body = {"agent": "c", "path": ["p/0001", "c/0002"],
            "error": "task p/0001/c/0002 failed: ModelError: quota"}
    assert parent.requests[2].messages[-1] == Message("user", RESULT_PREFIX + json.dumps(body))


async def test_results_tool_any_timeout_and_nothing(autojump_clock: Clock) -> None:
    parent = ScriptedModel([
        calls(results("r0")),
        calls(start("c", "3"), start("c", "8"), results("r1", all=False)),
        calls(results("r2", timeout=2)),
        calls(results("r3")),
        "done",
    ])
    async with open_pool() as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper)))
        register(pool, parent)
        await (await pool.submit("p", "go")).wait()
    notes = [r.messages[-1].content if r.messages[-1].role == "tool" else
             [m.content for m in r.messages if m.role == "tool"][-1] for r in parent.requests[1:]]
    assert notes == [
        "no background subagents: nothing to wait for",
        "1 result arrived (they follow as messages); still running: p/0001/c/0003",
        "stopped waiting after 2s: 0 results arrived; still running: p/0001/c/0003",
        "1 result arrived (they follow as messages)",
    ]
    assert trio.current_time() == 8.0


async def test_background_needs_a_pool_task_and_so_do_results() -> None:
    async with open_pool() as pool:
        pool.register(Spec("c", model=ScriptedModel(["x"])))
        outer = Agent(
            model=ScriptedModel([calls(start("c", "t", id="s"), results()), "ok"]),
            tools=[SubagentTool(pool), SubagentResultsTool(pool)],
        )
        result = await outer.run("go")
    assert [m.content for m in result.messages if m.role == "tool"] == [
        "tool 'subagent' failed: SubagentError: wait: false is only open to runs of the "
        "pool's tasks; call with wait: true",
        "tool 'subagent_results' failed: SubagentError: subagent_results is only open to "
        "runs of the pool's tasks (they alone start background subagents)",
    ]
    assert pool.statistics().accepted == 0


# -- 3/4. orphans and critical children ------------------------------------------------


async def test_critical_child_survives_its_parent_and_its_result_is_an_orphan(
    autojump_clock: Clock,
) -> None:
    parent = ScriptedModel([calls(start("k", "20")), "bye"])
    stream = Stream(1000)
    audit = MemorySink()
    async with open_pool(events=stream, defaults=Defaults(audit=audit)) as pool:
        pool.register(Spec("k", model=ScriptedModel(sleeper), critical=True))
        register(pool, parent)
        task = await pool.submit("p", "go")
        result = await task.wait()
        assert trio.current_time() == 0.0
        assert result.output == "bye"
        [child] = task.children
        assert child.status is TaskStatus.running
    assert trio.current_time() == 20.0
    assert task.children[0].status is TaskStatus.finished
    stream.close()
    events = await drain(stream)
    assert kinds(events, child.path)[-2:] == ["task_finished", "task_orphaned"]
    orphan = events[-1]
    assert (orphan.path, orphan.output, orphan.error) == (child.path, "slept 20", None)
    entry = audit.entries[-1]
    assert (entry.kind, entry.path, entry.result) == ("task_orphaned", child.path, "slept 20")
    assert dict(entry.data) == {"agent": "k", "parent": "p/0001"}


async def test_non_critical_background_child_is_cancelled_when_its_parent_ends(
    autojump_clock: Clock,
) -> None:
    parent = ScriptedModel([calls(start("c", "20")), Delayed(3, "bye")])
    stream = Stream(1000)
    async with open_pool(events=stream) as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper)))
        register(pool, parent)
        task = await pool.submit("p", "go")
        await task.wait()
        [child] = task.children
        assert child.done and child.status is TaskStatus.cancelled
        assert trio.current_time() == 3.0
    stream.close()
    events = await drain(stream)
    child_kinds = kinds(events, child.path)
    assert child_kinds[-3:] == ["agent_end", "task_cancelled", "task_orphaned"]
    assert events[-2].error == "task p/0001/c/0002 was cancelled"
    assert (events[-2].path, events[-2].output) == (child.path, None)
    assert kinds(events)[-1] == "task_finished"  # the parent resolves after its child ended


async def test_critical_waited_child_outlives_its_timed_out_parent(autojump_clock: Clock) -> None:
    parent = ScriptedModel([calls(start("k", "50", wait=True))])
    stream = Stream(1000)
    async with open_pool(events=stream) as pool:
        pool.register(Spec("k", model=ScriptedModel(sleeper), critical=True))
        register(pool, parent, timeout=10)
        task = await pool.submit("p", "go")
        with pytest.raises(TaskTimeout):
            await task.wait()
        [child] = task.children
    assert trio.current_time() == 50.0
    assert child.status is TaskStatus.finished
    stream.close()
    assert kinds(await drain(stream), child.path)[-1] == "task_orphaned"


@pytest.mark.parametrize("how", ["task", "pool"])
async def test_hard_abort_cascades_through_three_levels(autojump_clock: Clock, how: str) -> None:
    def level(request: ModelRequest) -> ScriptItem:
        me = request.messages[-1].content
        nxt = {"a": "b", "b": "c"}.get(me)
        if nxt is not None and len(request.messages) == 2:
            return calls(start("w", nxt))
        return Blocked("never")

    stream = Stream(1000)
    async with open_pool(events=stream) as pool:
        pool.register(Spec("w", model=ScriptedModel(level), critical=True,
                           tools=[SubagentTool(pool)]))
        root = await pool.submit("w", "a")
        await trio.testing.wait_all_tasks_blocked()
        [mid] = root.children
        [leaf] = mid.children
        assert leaf.path == ("w/0001", "w/0002", "w/0003")
        if how == "task":
            root.cancel()
        else:
            pool.cancel()
        with pytest.raises(TaskCancelled):
            await root.wait()
        assert [t.status for t in (root, mid, leaf)] == [TaskStatus.cancelled] * 3
        assert mid.done and leaf.done
    assert trio.current_time() == 0.0
    stream.close()
    events = await drain(stream)
    assert kinds(events, leaf.path)[-2:] == ["task_cancelled", "task_orphaned"]
    assert kinds(events, mid.path)[-2:] == ["task_cancelled", "task_orphaned"]


# -- 5. the fan-out bound --------------------------------------------------------------


async def test_fan_out_error_after_exactly_children_timeout(autojump_clock: Clock) -> None:
    parent = ScriptedModel([calls(start("c", "100"), start("c", "100"), start("c", "1")), "ok"])
    async with open_pool(children_timeout=30) as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper)))
        register(pool, parent, max_children=2)
        await (await pool.submit("p", "go")).wait()
    last = parent.requests[1].messages[-1]
    assert last == Message(
        "tool",
        "tool 'subagent' failed: MaxChildrenError: cannot start agent 'c': run p/0001 has "
        "reached its limit of 2 live subagents (max_children) and none ended within 30s; "
        "wait for results or work without delegating",
        tool_call_id="start-1",
        is_error=True,
    )
    assert trio.current_time() == 30.0  # the error came at 30; the parent then ended
    stats = pool.statistics()
    assert (stats.accepted, stats.finished, stats.cancelled) == (3, 1, 2)


async def test_fan_out_slot_frees_when_a_child_ends(autojump_clock: Clock) -> None:
    parent = ScriptedModel([calls(start("c", "4"), start("c", "9")), "ok"])
    async with open_pool(max_children=1) as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper)))
        register(pool, parent)
        task = await pool.submit("p", "go")
        await task.wait()
        assert trio.current_time() == 4.0
        assert [c.path[-1] for c in task.children] == ["c/0002", "c/0003"]


# -- the caller's tool_timeout bounds an unbounded subagent -----------------------------


async def test_unbounded_waited_child_is_bounded_by_the_callers_tool_timeout(
    autojump_clock: Clock,
) -> None:
    parent = ScriptedModel([calls(start("c", "t", wait=True, id="w")), "gave up"])
    async with open_pool() as pool:
        pool.register(Spec("c", model=ScriptedModel([Blocked("never")]), idle_timeout=None))
        register(pool, parent)
        task = await pool.submit("p", "go")
        await task.wait()
        [child] = task.children
    assert trio.current_time() == 120.0
    assert child.status is TaskStatus.cancelled
    assert parent.requests[1].messages[-1].content == (
        "tool 'subagent' failed: SubagentError: subagent p/0001/c/0002 gave no result within "
        "120s and was cancelled (its spec has neither timeout nor idle_timeout, so the "
        "caller's tool_timeout bounds it)"
    )


# -- 6. usage of the tree ---------------------------------------------------------------


async def test_tree_usage_is_the_sum_of_the_parts(autojump_clock: Clock) -> None:
    parent = ScriptedModel(
        [calls(start("c", "1", wait=True, id="w"), start("d", "2")), calls(results()), "end"],
        usage=Usage(100, 10),
    )
    stream = Stream(1000)
    async with open_pool(events=stream) as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper, usage=Usage(20, 2))))
        grand = ScriptedModel(sleeper, usage=Usage(3, 1))
        pool.register(Spec("g", model=grand))
        pool.register(Spec("d", model=ScriptedModel(
            lambda r: calls(start("g", "1", wait=True, id="g")) if len(r.messages) == 2
            else "d done", usage=Usage(5, 5)), tools=[SubagentTool(pool)]))
        register(pool, parent)
        task = await pool.submit("p", "go")
        result = await task.wait()
    assert result.summary.usage == Usage(300, 30)
    assert result.tree_usage == Usage(300 + 20 + 10 + 3, 30 + 2 + 10 + 1)
    assert task.tree_usage == result.tree_usage
    stream.close()
    finished = {e.path: e.tree_usage for e in await drain(stream) if e.kind == "task_finished"}
    assert finished == {
        ("p/0001",): Usage(333, 43),
        ("p/0001", "c/0002"): Usage(20, 2),
        ("p/0001", "d/0003"): Usage(13, 11),
        ("p/0001", "d/0003", "g/0004"): Usage(3, 1),
    }
