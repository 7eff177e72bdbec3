"""A run waiting in ``subagent_results`` when its background child pauses for approval
is not told that a result arrived (issue 32 item 4): the child has none yet. Before,
the stored call read "1 result arrived (they follow as messages)", and after the
resume the model, finding none, could end its run and cancel the approved child."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from agentcore import FunctionTool, Message, ModelRequest, RunState, ToolCall
from agentcore.testing import ScriptedModel
from subagent import Pool, Spec, SubagentResultsTool, SubagentTool, TaskPaused, open_pool
from subagent._reply import RESULT_PREFIX
from tests.agentcore._durable import gate


def _call(id: str, name: str, arguments: dict[str, object]) -> ToolCall:
    return ToolCall(id, name, json.dumps(arguments))


def _root(request: ModelRequest) -> Message:
    n = sum(1 for m in request.messages if m.role == "assistant")
    if n == 0:
        start = {"agent": "bg", "task": "work", "wait": False}
        return Message("assistant", "", tool_calls=[_call("start-bg", "subagent", start)])
    for m in request.messages:
        if m.role == "user" and m.content.startswith(RESULT_PREFIX):
            body = json.loads(m.content[len(RESULT_PREFIX):])
            return Message("assistant", f"root got {body['output']}")
    return Message("assistant", "", tool_calls=[_call(f"wait{n}", "subagent_results", {})])


def _bg(request: ModelRequest) -> Message:
    n = sum(1 for m in request.messages if m.role == "assistant")
    if n == 0:
        return Message("assistant", "", tool_calls=[_call("b1", "bwrite", {})])
    return Message("assistant", f"bg done: {request.messages[-1].content}")


def _register(pool: Pool, wrote: list[str]) -> None:
    async def bwrite(arguments: str) -> str:
        await trio.sleep(1)
        wrote.append(arguments)
        return "written"

    pool.register(Spec("root", model=ScriptedModel(_root),
                       tools=[SubagentTool(pool), SubagentResultsTool(pool)]))
    pool.register(Spec("bg", model=ScriptedModel(_bg), gate=gate("b1", None),
                       tools=[FunctionTool("bwrite", "write", {"type": "object"}, bwrite)]))


async def test_a_child_paused_while_its_parent_waits_is_no_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    wrote: list[str] = []
    async with open_pool() as pool:
        _register(pool, wrote)
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("root", "go")).wait()
    state = RunState.from_json(info.value.state.to_json())
    [note] = [m.content for m in state.messages if m.tool_call_id == "wait1"] or [
        p.result for p in state.pending if p.call.id == "wait1"]
    assert note == ("0 results arrived; paused for approval: root/0001/bg/0002 (no result "
                    "yet: call subagent_results again after the approval)")
    state.approve("b1", path=("root/0001", "bg/0002"))
    async with open_pool() as pool:
        _register(pool, wrote)
        result = await (await pool.resume(state)).wait()
    assert result.output == "root got bg done: written"
    assert wrote == ["{}"]
