"""Every limit ends a workspace tool call on time: the thread doing its work is
abandoned on cancel and finishes in the background (issues 13 and 15)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from trio.testing import MockClock

from agentcore import Agent
from agentcore.testing import ScriptedModel, tool_call_reply
from subagent import Spec, TaskCancelled, TaskTimeout, open_pool
from subagent.tools import Workspace, WorkspaceTool

#: Real seconds a blocked operation waits before it gives up on its own: a thread
#: that is not abandoned holds its call this long, and the test sees it finished.
BLOCK = 10.0


class Blocker:
    """A sync operation that blocks its worker thread until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.finished = threading.Event()

    def __call__(self, workspace: Workspace, args: Mapping[str, Any]) -> str:
        self.release.wait(BLOCK)
        self.finished.set()
        return "finished"

    def tool(self, root: Path) -> WorkspaceTool:
        return WorkspaceTool(
            "slow", "Blocks its thread.", {"type": "object", "properties": {}}, True,
            Workspace.open(root), self,
        )

    def end(self) -> None:
        """Release the thread and wait (real time) for it to finish in the background."""
        assert not self.finished.is_set(), "the call waited for its thread"
        self.release.set()
        assert self.finished.wait(BLOCK)


@pytest.fixture
def blocker() -> Iterator[Blocker]:
    b = Blocker()
    yield b
    b.release.set()


async def test_cancel_returns_at_once(
    autojump_clock: MockClock, tmp_path: Path, blocker: Blocker
) -> None:
    with trio.move_on_after(5):
        await blocker.tool(tmp_path).execute("{}")
    assert trio.current_time() == 5
    blocker.end()


async def test_tool_timeout_ends_the_call_with_an_error_result(
    autojump_clock: MockClock, tmp_path: Path, blocker: Blocker
) -> None:
    model = ScriptedModel([tool_call_reply("slow"), "gave up"])
    agent = Agent(model=model, tools=(blocker.tool(tmp_path),), tool_timeout=0.5)
    result = await agent.run("go")
    assert trio.current_time() == 0.5
    assert result.output == "gave up"
    assert model.requests[1].messages[-1].content == "tool 'slow' timed out after 0.5s"
    assert result.summary.tool_errors == 1
    blocker.end()


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"timeout": 0.5}, "task w/0001 timed out after 0.5s"),
        ({"idle_timeout": 0.5}, "task w/0001 was idle for 0.5s: no event within its idle_timeout"),
    ],
)
async def test_task_limits_end_on_time(
    autojump_clock: MockClock, tmp_path: Path, blocker: Blocker, limits: dict[str, Any],
    message: str,
) -> None:
    # Issue 15: a sync tool blocking its thread delayed these until the thread returned.
    model = ScriptedModel([tool_call_reply("slow"), "never"])
    async with open_pool() as pool:
        spec = Spec("w", model=model, tools=(blocker.tool(tmp_path),))
        pool.register(attrs.evolve(spec, **limits))
        task = await pool.submit("w", "go")
        with pytest.raises(TaskTimeout) as info:
            await task.wait()
    assert str(info.value) == message
    assert trio.current_time() == 0.5
    blocker.end()


async def test_a_cancelled_task_ends_at_once(
    autojump_clock: MockClock, tmp_path: Path, blocker: Blocker
) -> None:
    model = ScriptedModel([tool_call_reply("slow"), "never"])
    async with open_pool() as pool:
        pool.register(Spec("w", model=model, tools=(blocker.tool(tmp_path),)))
        task = await pool.submit("w", "go")
        await trio.sleep(3)
        task.cancel()
        with pytest.raises(TaskCancelled):
            await task.wait()
    assert trio.current_time() == 3
    blocker.end()


async def test_abandoned_threads_do_not_hold_up_other_thread_work(
    autojump_clock: MockClock, tmp_path: Path, blocker: Blocker
) -> None:
    # More abandoned calls than the workspace's thread limit: other thread work of
    # the process (the default limiter: audit sinks, say) still runs at once.
    tool = blocker.tool(tmp_path)
    for _ in range(12):
        with trio.move_on_after(1):
            await tool.execute("{}")
    assert trio.current_time() == 12
    assert await trio.to_thread.run_sync(lambda: "free") == "free"
    blocker.end()
