"""A failing or hung audit sink in background delegation (SPEC 3.4, 3.5): a delivery
that cannot be audited fails the parent closed with an AuditError naming the entry
and its result is orphaned instead; an orphan entry that fails or hangs is reported
on the ``task_orphaned`` event. The pool never crashes and nothing hangs."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from agentcore import AuditError, Message, ModelRequest, ToolCall
from agentcore.testing import Delayed, ScriptedModel, ScriptItem
from subagent import (
    Spec,
    Stream,
    SubagentResultsTool,
    SubagentTool,
    TaskFailed,
    TaskStatus,
    open_pool,
)
from subagent._pool._lifecycle import END_TIMEOUT
from tests._failing_sink import DISK_FULL, FailingSink

from .helpers import drain, kinds

Clock = trio.testing.MockClock


def start(task: str, agent: str = "c") -> Message:
    arguments = json.dumps({"agent": agent, "task": task, "wait": False})
    return Message("assistant", tool_calls=(ToolCall(f"start-{task}", "subagent", arguments),))


def sleeper(request: ModelRequest) -> ScriptItem:
    text = request.messages[-1].content
    return Delayed(float(text), f"slept {text}")


async def test_a_delivery_that_cannot_be_audited_fails_the_parent_with_an_audit_error(
    autojump_clock: Clock,
) -> None:
    # The bug: the sink's OSError itself ended the parent run. Now the run fails closed
    # with an AuditError naming result_delivered; the result, not delivered, is orphaned.
    sink = FailingSink("result_delivered")
    results = ToolCall("r", "subagent_results", "{}")
    parent = ScriptedModel([start("4"), Message("assistant", tool_calls=(results,)), "never"])
    stream = Stream(1000)
    async with open_pool(events=stream) as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper)))
        pool.register(Spec("p", model=parent, audit=sink,
                           tools=[SubagentTool(pool), SubagentResultsTool(pool)]))
        task = await pool.submit("p", "go")
        with pytest.raises(TaskFailed) as info:
            await task.wait()
    assert trio.current_time() == 4.0
    text = f"the audit sink failed to record 'result_delivered': {DISK_FULL}"
    assert str(info.value) == f"task p/0001 failed: AuditError: {text}"
    assert isinstance(info.value.__cause__, AuditError)
    assert str(info.value.__cause__) == text
    assert isinstance(info.value.__cause__.__cause__, OSError)
    assert len(parent.requests) == 2
    stream.close()
    events = await drain(stream)
    [child] = task.children
    assert "result_delivered" not in kinds(events)
    orphan = [e for e in events if e.kind == "task_orphaned"]
    assert [(e.path, e.output, e.error) for e in orphan] == [(child.path, "slept 4", None)]
    assert pool.statistics().failed == 1


@pytest.mark.parametrize("critical", [False, True])
async def test_a_failing_orphan_audit_is_reported_on_the_event_instead_of_crashing_the_pool(
    autojump_clock: Clock, critical: bool
) -> None:
    # Critical: the child ends at 20, after its parent (run_task reports the orphan).
    # Not critical: its result arrives at 1 during the parent's last answer (max_turns)
    # and is orphaned unread by the parent's end (end_children).
    sink = FailingSink("task_orphaned")
    parent = ScriptedModel([start("20" if critical else "1"), Delayed(3, "bye")])
    stream = Stream(1000)
    async with open_pool(events=stream) as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper), audit=sink, critical=critical))
        pool.register(Spec("p", model=parent, tools=[SubagentTool(pool)], max_turns=2))
        task = await pool.submit("p", "go")
        assert (await task.wait()).output == "bye"
    assert trio.current_time() == (20.0 if critical else 3.0)
    [child] = task.children
    assert child.status is TaskStatus.finished
    stream.close()
    events = await drain(stream)
    orphan = events[-1] if critical else events[-2]
    assert (orphan.kind, orphan.path) == ("task_orphaned", child.path)
    text = f"the audit sink failed to record 'task_orphaned': {DISK_FULL}"
    assert orphan.error == f"AuditError: {text}"
    assert "task_orphaned" not in sink.kinds


async def test_a_failing_orphan_audit_keeps_the_childs_own_error_on_the_event(
    autojump_clock: Clock,
) -> None:
    sink = FailingSink("task_orphaned")
    parent = ScriptedModel([start("20"), Delayed(3, "bye")])
    stream = Stream(1000)
    async with open_pool(events=stream) as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper), audit=sink))
        pool.register(Spec("p", model=parent, tools=[SubagentTool(pool)]))
        await (await pool.submit("p", "go")).wait()
    stream.close()
    orphan = (await drain(stream))[-2]
    assert orphan.kind == "task_orphaned"
    assert orphan.error == (
        "task p/0001/c/0002 was cancelled; AuditError: the audit sink failed to record "
        f"'task_orphaned': {DISK_FULL}"
    )


async def test_a_hung_orphan_audit_does_not_swallow_the_orphan_event(
    autojump_clock: Clock,
) -> None:
    # The bug: the entry and its event shared one bound, so a sink that hung on the
    # entry used it up and the orphan was never reported.
    sink = FailingSink("task_orphaned", hang=True)
    parent = ScriptedModel([start("20"), "bye"])
    stream = Stream(1000)
    async with open_pool(events=stream) as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper), audit=sink, critical=True))
        pool.register(Spec("p", model=parent, tools=[SubagentTool(pool)]))
        await (await pool.submit("p", "go")).wait()
    assert trio.current_time() == 20.0 + END_TIMEOUT
    stream.close()
    orphan = (await drain(stream))[-1]
    assert orphan.kind == "task_orphaned"
    assert orphan.output == "slept 20"
    assert orphan.error == "AuditError: the audit sink did not record 'task_orphaned' within 5s"
