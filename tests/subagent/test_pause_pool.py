"""A run that pauses in the pool (issue 20 item 2, pool side): TaskStatus.paused,
TaskPaused with the state, Pool.resume."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentcore import ResumeError, RunState
from subagent import Spec, TaskPaused, TaskStatus, UnknownAgentError, open_pool
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

