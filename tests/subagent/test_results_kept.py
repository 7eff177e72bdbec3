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
from subagent._background import RESULT_PREFIX
from subagent._current import current_task
from tests.agentcore._durable import gate

START = ToolCall("start-bg", "subagent", '{"agent": "bg", "task": "work", "wait": false}')
STARTED = '{"agent": "bg", "path": ["root/0001", "bg/0002"], "status": "started"}'
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
