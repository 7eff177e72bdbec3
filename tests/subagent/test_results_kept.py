"""``subagent_results`` after a resume (issue 20): a background result kept in the
paused state is in the resumed run's inbox, not in the pool's tree; the tool counts it
(it used to say "nothing to wait for" one turn before the message came)."""

from __future__ import annotations

import contextlib

import pytest
import trio
import trio.testing

from agentcore import FunctionTool, Message, ModelRequest, ToolCall
from agentcore.testing import ScriptedModel
from subagent import (
    Pool,
    Spec,
    SubagentResultsTool,
    SubagentTool,
    TaskError,
    TaskPaused,
    open_pool,
)
from subagent._current import current_task
from subagent._reply import RESULT_PREFIX
from tests.agentcore._durable import gate
from tests.subagent._bgparts import START, STARTED

RESULT = (RESULT_PREFIX
          + '{"agent": "bg", "path": ["root/0001", "bg/0002"], "output": "bg done"}')


def root_model(every: bool) -> ScriptedModel:
    # Turn 1: hold (until bg ended), write (deferred), then subagent_results (not
    # started when the run pauses: it runs on resume, before any model call).
    arguments = "{}" if every else '{"all": false}'

    def reply(request: ModelRequest) -> Message:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n == 0:
            return Message("assistant", "", tool_calls=[START])
        if n == 1:
            return Message("assistant", "", tool_calls=[
                ToolCall("h1", "hold", "{}"), ToolCall("w1", "write", "{}"),
                ToolCall("r1", "subagent_results", arguments)])
        return Message("assistant", "end")

    return ScriptedModel(reply)


def register(pool: Pool, every: bool) -> None:
    async def hold(arguments: str) -> str:
        task = current_task.get()
        assert task is not None
        for child in task.children:
            with contextlib.suppress(TaskError):
                await child.wait()
        return "held"

    async def write(arguments: str) -> str:
        await trio.lowlevel.checkpoint()
        return "written"

    pool.register(Spec("root", model=root_model(every), gate=gate("w1", None), tools=[
        SubagentTool(pool), SubagentResultsTool(pool),
        FunctionTool("hold", "hold", {"type": "object"}, hold, read_only=True),
        FunctionTool("write", "write", {"type": "object"}, write)]))
    pool.register(Spec("bg", model=ScriptedModel(lambda r: Message("assistant", "bg done"))))


@pytest.mark.parametrize("every", [True, False])
async def test_subagent_results_counts_a_kept_result_after_a_resume(
    autojump_clock: trio.testing.MockClock, every: bool
) -> None:
    async with open_pool() as pool:
        register(pool, every)
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("root", "go")).wait()
        state = info.value.state
        assert [(p.call.id, str(p.status)) for p in state.pending] == [
            ("w1", "deferred"), ("r1", "waiting")]
        [kept] = state.children
        assert kept.background is not None and kept.background.result == RESULT
        state.approve("w1", by="alice")
        result = await (await pool.resume(state)).wait()
    assert [m.content for m in result.messages] == [
        "go", "", STARTED, "", "held", "written",
        "1 result arrived (they follow as messages)", RESULT, "end",
    ]
    assert trio.current_time() == 0.0


def _start(call_id: str, task: str) -> ToolCall:
    return ToolCall(call_id, "subagent", f'{{"agent": "bg", "task": "{task}", "wait": false}}')


def two_model() -> ScriptedModel:
    # Turn 0 starts a (ends at once) and b (pauses: its gate defers b1); turn 1 holds
    # until both resolved (b's pause pauses root), then write and subagent_results
    # (all: false), not started at the pause.
    def reply(request: ModelRequest) -> Message:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n == 0:
            return Message("assistant", "", tool_calls=[_start("sa", "a"), _start("sb", "b")])
        if n == 1:
            return Message("assistant", "", tool_calls=[
                ToolCall("h1", "hold", "{}"), ToolCall("w1", "write", "{}"),
                ToolCall("r1", "subagent_results", '{"all": false}')])
        return Message("assistant", "end")

    return ScriptedModel(reply)


def bg_two() -> ScriptedModel:
    def reply(request: ModelRequest) -> Message:
        if request.messages[-1].content == "a":
            return Message("assistant", "a done")
        if request.messages[-1].content == "b":
            return Message("assistant", "", tool_calls=[ToolCall("b1", "bwrite", "{}")])
        return Message("assistant", "b done")

    return ScriptedModel(reply)


async def test_subagent_results_one_does_not_wait_with_a_kept_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def hold(arguments: str) -> str:
        task = current_task.get()
        assert task is not None
        for child in task.children:
            with contextlib.suppress(TaskError):
                await child.wait()
        return "held"

    async def write(arguments: str) -> str:
        await trio.sleep(1)
        return "written"

    async def bwrite(arguments: str) -> str:
        await trio.sleep(5)
        return "bwritten"

    tools = [FunctionTool("hold", "hold", {"type": "object"}, hold, read_only=True),
             FunctionTool("write", "write", {"type": "object"}, write),
             FunctionTool("bwrite", "bwrite", {"type": "object"}, bwrite)]
    async with open_pool() as pool:
        pool.register(Spec("root", model=two_model(), tools=[
            SubagentTool(pool), SubagentResultsTool(pool), *tools]))
        pool.register(Spec("bg", model=bg_two(), gate=gate("b1", None), tools=tools[2:]))
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("root", "go")).wait()
        state = info.value.state
        assert [(p.call.id, str(p.status)) for p in state.pending] == [
            ("h1", "done"), ("w1", "waiting"), ("r1", "waiting")]
        state.approve("b1", by="alice")
        start = trio.current_time()
        result = await (await pool.resume(state)).wait()
    notes = [m.content for m in result.messages if m.tool_call_id == "r1"]
    # a's kept result is in the inbox: one has arrived, no wait for b (its bwrite
    # takes 5 s; root ends at 1 s, after w1, and b is cancelled with it). The resumed
    # tasks keep their runs' paths.
    assert notes == [
        "1 result arrived (they follow as messages); still running: root/0001/bg/0003"]
    assert trio.current_time() - start == 1.0
