"""A run that pauses in the pool (issue 20 item 2, pool side): TaskStatus.paused,
TaskPaused with the state, Pool.resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from agentcore import (
    CallStatus,
    FunctionTool,
    Message,
    ModelRequest,
    PendingApproval,
    ResumeError,
    RunState,
    ToolCall,
)
from agentcore.testing import ScriptedModel
from ledger import JsonlSink, verify
from subagent import (
    Spec,
    SubagentTool,
    TaskPaused,
    TaskStatus,
    UnknownAgentError,
    open_pool,
)
from tests.agentcore._durable import gate, model
from tests.agentcore._durable import make_tool as tool

Clock = trio.testing.MockClock
WORK = [[["c1", "write", 2], ["c2", "look", 1]]]


def spec(name: str = "w", agent_id: str = "") -> Spec:
    return Spec(name, model=model(WORK), tools=[tool("write", False), tool("look", True)],
                gate=gate("c1", None), agent_id=agent_id)


async def test_a_task_pauses_and_the_pool_resumes_it(autojump_clock: Clock) -> None:
    async with open_pool() as pool:
        pool.register(spec())
        task = await pool.submit("w", "go")
        with pytest.raises(TaskPaused) as info:
            await task.wait()
        assert str(info.value) == "task w/0001 paused for approval"
        assert task.status is TaskStatus.paused
        stats = pool.statistics()
        assert (stats.accepted, stats.paused, stats.finished, stats.running) == (1, 1, 0, 0)
        state = info.value.state
        assert [a.call_id for a in state.pending_approvals] == ["c1"]
        assert state.path == ("w/0001",)

        stored = RunState.from_json(state.to_json())
        stored.approve("c1", by="alice")
        again = await pool.resume(stored)
        result = await again.wait()
        assert again.path == ("w/0002",)
        assert result.output == "done after 1 turns"
        assert result.summary.tool_calls == 2
        assert trio.current_time() == 3.0
        stats = pool.statistics()
        assert (stats.accepted, stats.paused, stats.finished) == (2, 1, 1)


async def test_resume_binds_the_spec_by_agent_id(autojump_clock: Clock) -> None:
    async with open_pool() as pool:
        pool.register(spec("w", agent_id="writer"))
        task = await pool.submit("w", "go")
        with pytest.raises(TaskPaused) as info:
            await task.wait()
        state = info.value.state
        assert state.agent == "writer"
        with pytest.raises(ResumeError, match="has no answer yet"):
            await pool.resume(state)
        state.deny("c1", "no")
        pool.register(spec("v", agent_id="writer"))
        with pytest.raises(UnknownAgentError):
            await pool.resume(state)  # two specs have that agent id
        result = await (await pool.resume(state, name="w")).wait()
        assert result.summary.denied == 1


async def test_resume_with_a_missing_tool_is_refused(autojump_clock: Clock) -> None:
    async with open_pool() as pool:
        pool.register(spec())
        task = await pool.submit("w", "go")
        with pytest.raises(TaskPaused) as info:
            await task.wait()
        state = info.value.state
        state.approve("c1")
        pool.register(Spec("bare", model=model(WORK), agent_id="w2"))
        state.agent = "w2"
        with pytest.raises(ResumeError) as error:
            await pool.resume(state, name="bare")
        assert str(error.value) == (
            "tool 'write' of approved call 'c1' is not among this Agent's tools (none)"
        )



def delegating(child: str) -> ScriptedModel:
    # Delegates once to ``child``, then answers with what it got back.
    def reply(request: ModelRequest) -> Message:
        if not any(m.role == "assistant" for m in request.messages):
            call = ToolCall(f"to-{child}", "subagent",
                            json.dumps({"agent": child, "task": "go on"}))
            return Message("assistant", "", tool_calls=[call])
        return Message("assistant", "got " + json.loads(request.messages[-1].content)["output"])

    return ScriptedModel(reply)


@pytest.mark.parametrize("approve", [True, False])
async def test_a_deferral_deep_in_a_tree_pauses_it_up_to_the_root(
    autojump_clock: Clock, tmp_path: Path, approve: bool
) -> None:
    writes: list[str] = []

    async def write(arguments: str) -> str:
        writes.append(arguments)
        await trio.sleep(1)
        return "written"

    leaf_model = model([[["c1", "write", 0]]])
    ledger_path = tmp_path / "audit.jsonl"
    sink = JsonlSink(ledger_path)
    async with open_pool() as pool:
        tools = [SubagentTool(pool)]
        pool.register(Spec("root", model=delegating("mid"), tools=tools, audit=sink))
        pool.register(Spec("mid", model=delegating("leaf"), tools=tools, audit=sink))
        pool.register(Spec("leaf", model=leaf_model, audit=sink, gate=gate("c1", None),
                           tools=[FunctionTool("write", "w", {}, write)]))
        task = await pool.submit("root", "start")
        with pytest.raises(TaskPaused) as info:
            await task.wait()
        assert pool.statistics().paused == 3
        assert [t.status for t in (task, task.children[0], task.children[0].children[0])] == [
            TaskStatus.paused] * 3
        state = info.value.state
        assert state.pending_approvals == (PendingApproval(
            ("root/0001", "mid/0002", "leaf/0003"), "c1", "write", '{"s": 0}', "ask a human"
        ),)
        assert [p.status for p in state.pending] == [CallStatus.delegated]
        assert [p.status for p in state.children[0].pending] == [CallStatus.delegated]
        assert writes == []

        stored = RunState.from_json(state.to_json())
        if approve:
            stored.approve("c1", by="alice")
        else:
            stored.deny("c1", "not now", by="bob")
        result = await (await pool.resume(stored)).wait()
        assert result.output == "got got done after 1 turns"
        assert writes == (['{"s": 0}'] if approve else [])
        stats = pool.statistics()
        assert (stats.paused, stats.finished, stats.accepted) == (3, 3, 6)
    await sink.aclose()
    report = verify(ledger_path)
    assert report.ok, report.message
    kinds = [json.loads(line)["kind"] for line in ledger_path.read_text().splitlines()]
    assert kinds.count("run_resumed") == 3
    assert kinds.count("approval") == 1
