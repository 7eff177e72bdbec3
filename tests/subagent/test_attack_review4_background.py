"""Attacks on a paused tree's background children (review4): a stored state is hostile
input, and whoever can write it (and re-digest it) must not get past the spec's own
policy: a background mark names an agent the parent's spec may not delegate to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from agentcore import BackgroundChild, FunctionTool, RunState
from ledger import JsonlSink
from subagent import Pool, Spec, SubagentResultsTool, SubagentTool, TaskPaused, open_pool
from tests.agentcore._durable import gate
from tests.subagent._bgtree import bg_model, register, root_model

Clock = trio.testing.MockClock


async def _paused_running(tmp_path: Path) -> RunState:
    sink = JsonlSink(tmp_path / "audit.jsonl")
    try:
        async with open_pool() as pool:
            register(pool, sink, tmp_path / "writes.log", "running")
            task = await pool.submit("root", "go")
            with pytest.raises(TaskPaused) as info:
                await task.wait()
    finally:
        await sink.aclose()
    return info.value.state


def _restricted(pool: Pool, sink: JsonlSink, ran: list[str], delegates: bool) -> None:
    # root may delegate to "bg" only (or to none: no delegation tool); "evil" is
    # registered too (another root's agent).
    def tool(name: str, called: str = "slow") -> FunctionTool:
        async def run(arguments: str) -> str:
            ran.append(name)
            await trio.sleep(json.loads(arguments)["s"])
            return "slept"

        return FunctionTool(called, called, {"type": "object"}, run, read_only=called == "slow")

    pool.register(Spec("root", model=root_model("running"), audit=sink, gate=gate("w1", None),
                       tools=[*([SubagentTool(pool)] if delegates else []),
                              SubagentResultsTool(pool), tool("root"), tool("write", "write")],
                       delegates_to=["bg"]))
    pool.register(Spec("bg", model=bg_model("running"), audit=sink, tools=[tool("bg")]))
    pool.register(Spec("evil", model=bg_model("running"), audit=sink, tools=[tool("evil")]))


REFUSED = {
    True: "'agent' must be one of the agents this run may delegate to ('bg'), not 'evil'",
    False: "this run may not delegate to any agent (asked for 'evil')",
}


@pytest.mark.parametrize("delegates", [True, False])
async def test_a_background_mark_cannot_name_an_agent_the_parent_may_not_delegate_to(
    autojump_clock: Clock, tmp_path: Path, delegates: bool
) -> None:
    state = await _paused_running(tmp_path)
    [child] = state.children
    assert child.background == BackgroundChild("start-bg", "bg")
    # Hand-edited (and re-digested: to_json writes a new digest): the mark names evil.
    child.background = BackgroundChild("start-bg", "evil")
    child.agent = "evil"
    stored = RunState.from_json(state.to_json())
    stored.approve("w1")
    ran: list[str] = []
    sink = JsonlSink(tmp_path / "audit2.jsonl")
    try:
        async with open_pool() as pool:
            _restricted(pool, sink, ran, delegates)
            task = await pool.resume(stored)
            result = await task.wait()
            stats = pool.statistics()
    finally:
        await sink.aclose()
    # evil never ran (only root's approved write did): the refusal is the child's
    # result, delivered once to root.
    assert ran == ["write"]
    assert stats.accepted == 1
    delivered = [m.content for m in result.messages if m.content.startswith("[subagent result]")]
    assert delivered == [
        "[subagent result] " + json.dumps({
            "agent": "evil", "path": ["root/0001", "bg/0002"],
            "error": "subagent root/0001/bg/0002 could not be resumed: invalid arguments "
                     f"for the subagent tool: {REFUSED[delegates]}",
        })
    ]
