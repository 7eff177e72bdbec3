"""A direct ``pool.submit(parent_path=...)`` under a live task is bounded by that
task's fan-out (``max_children``) like a delegation (issue 18 item 4), and a run
cannot escape ``max_depth`` by submitting under a shorter path (issue 16)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentcore import Message
from agentcore.testing import Delayed, ScriptedModel, tool_call_reply
from subagent import MaxChildrenError, Pool, Spec, SubagentTool, Task, TaskStatus, open_pool

Clock = trio.testing.MockClock


def sleeper(request: object) -> Delayed:
    text = request.messages[-1].content  # type: ignore[attr-defined]
    return Delayed(float(text), f"slept {text}")


async def parent_with_children(pool: Pool, *seconds: float) -> tuple[Task, list[Task]]:
    pool.register(Spec("p", model=ScriptedModel([Delayed(1000, "done")])))
    pool.register(Spec("c", model=ScriptedModel(sleeper)))
    parent = await pool.submit("p", "go")
    children = [
        await pool.submit("c", f"{s:g}", parent_path=parent.path) for s in seconds
    ]
    return parent, children


async def test_a_direct_submit_waits_for_a_fan_out_slot(autojump_clock: Clock) -> None:
    async with open_pool(max_children=2) as pool:
        parent, children = await parent_with_children(pool, 4, 100)
        with pytest.raises(trio.WouldBlock):
            pool.submit_nowait("c", "1", parent_path=parent.path)
        third = await pool.submit("c", "1", parent_path=parent.path)
        assert trio.current_time() == 4.0  # the first child ended: its slot went here
        assert children[0].status is TaskStatus.finished
        assert third.path == ("p/0001", "c/0004")
        assert [c.path[-1] for c in parent.children] == ["c/0002", "c/0003", "c/0004"]
        # Outside any task, the fan-out does not apply.
        assert pool.submit_nowait("c", "1").path == ("c/0005",)
        pool.cancel()


async def test_a_direct_submit_gives_up_after_children_timeout(autojump_clock: Clock) -> None:
    async with open_pool(max_children=1, children_timeout=30) as pool:
        parent, _ = await parent_with_children(pool, 100)
        with pytest.raises(MaxChildrenError) as caught:
            await pool.submit("c", "1", parent_path=parent.path)
        assert str(caught.value) == (
            "cannot start agent 'c': run p/0001 has reached its limit of 1 live subagents "
            "(max_children) and none ended within 30s; wait for results or work without "
            "delegating"
        )
        assert trio.current_time() == 30.0
        assert pool.statistics().accepted == 2
        pool.cancel()


async def test_a_cancelled_fan_out_wait_leaves_no_trace(autojump_clock: Clock) -> None:
    async with open_pool(max_children=1) as pool:
        parent, _ = await parent_with_children(pool, 4)
        with trio.move_on_after(2):
            await pool.submit("c", "1", parent_path=parent.path)
        assert pool.statistics().accepted == 2
        # The slot the first child frees at 4 is not handed to the withdrawn wait.
        late = await pool.submit("c", "1", parent_path=parent.path)
        assert trio.current_time() == 4.0
        assert late.path == ("p/0001", "c/0003")  # the withdrawn submit took no number
        assert parent._node.fanout_used == 1
        pool.cancel()


async def test_the_fan_out_counts_direct_and_delegated_children_alike(
    autojump_clock: Clock,
) -> None:
    # The parent holds its one fan-out slot with a direct child; its delegation waits.
    async with open_pool(max_children=1, children_timeout=30) as pool:
        pool.register(Spec("c", model=ScriptedModel(sleeper)))
        model = ScriptedModel(
            [
                Delayed(1, tool_call_reply("subagent", '{"agent": "c", "task": "2"}', id="d")),
                "done",
            ]
        )
        pool.register(Spec("p", model=model, tools=[SubagentTool(pool)]))
        parent = await pool.submit("p", "go")
        direct = await pool.submit("c", "5", parent_path=parent.path)
        result = await parent.wait()
        assert result.output == "done"
        assert direct.status is TaskStatus.finished
        # The delegation waited from 1 to 5 for the slot, then its child slept 2s.
        assert trio.current_time() == 7.0
        assert model.requests[1].messages[-1].content == (
            '{"agent": "c", "path": ["p/0001", "c/0003"], "output": "slept 2"}'
        )


class RootSubmitter:
    """A tool that submits a task at the root of the pool (``parent_path=()``)."""

    name = "root"
    description = "Starts a root task."
    parameters = {"type": "object", "properties": {}}  # noqa: RUF012
    read_only = True

    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    async def execute(self, arguments: str) -> str:
        task = await self.pool.submit("leaf", "x", parent_path=())
        return (await task.wait()).output


async def test_a_run_cannot_escape_max_depth_by_a_root_submit(autojump_clock: Clock) -> None:
    async with open_pool(max_depth=1) as pool:
        pool.register(Spec("leaf", model=ScriptedModel(["leaf"])))
        model = ScriptedModel([tool_call_reply("root", "{}", id="r"), "gave up"])
        pool.register(Spec("top", model=model, tools=[RootSubmitter(pool)]))
        task = await pool.submit("top", "go")
        assert (await task.wait()).output == "gave up"
    assert model.requests[1].messages[-1] == Message(
        "tool",
        "tool 'root' failed: MaxDepthError: cannot run agent 'leaf' under (root) from within "
        "the run of top/0001: that would be depth 2 (a task started from within a run counts "
        "one level below it), and the pool's max_depth is 1",
        tool_call_id="r",
        is_error=True,
    )
    assert pool.statistics().accepted == 1


async def test_a_root_submit_from_a_run_counts_one_level_below_it(
    autojump_clock: Clock,
) -> None:
    # Within the limit, the root task runs at depth 2: at max_depth 2 it may not submit.
    async with open_pool(max_depth=2) as pool:
        inner = ScriptedModel([tool_call_reply("root", "{}", id="r2"), "inner done"])
        pool.register(Spec("leaf", model=inner, tools=[RootSubmitter(pool)]))
        outer = ScriptedModel([tool_call_reply("root", "{}", id="r1"), "outer done"])
        pool.register(Spec("top", model=outer, tools=[RootSubmitter(pool)]))
        task = await pool.submit("top", "go")
        assert (await task.wait()).output == "outer done"
    assert inner.requests[1].messages[-1].content == (
        "tool 'root' failed: MaxDepthError: cannot run agent 'leaf' under (root) from within "
        "the run of leaf/0002: that would be depth 3 (a task started from within a run "
        "counts one level below it), and the pool's max_depth is 2"
    )
    assert outer.requests[1].messages[-1].content == "inner done"
