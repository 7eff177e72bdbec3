"""A resumed task cancelled before its run started (issue 32 item 5d): its row, which
the resume claim (or the crash, for a recovered one) left ``running``, is marked
ended, as a new task's is: a later ``recover()`` does not run the approved calls of a
resume its caller cancelled. Before, it resumed it."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from agentcore.testing import RecordingTool
from subagent import Spec, SqliteCheckpoints, TaskCancelled, TaskPaused, open_pool
from tests.agentcore._durable import gate, make_tool, model

WORK = [[["c1", "write", 0]]]
HOLD = [[["h1", "look", 3600]]]


def specs(write: RecordingTool) -> list[Spec]:
    look = make_tool("look", True)
    return [Spec("w", model=model(WORK), tools=[write, look], gate=gate("c1", None)),
            Spec("hold", model=model(HOLD), tools=[look])]


@pytest.mark.parametrize("before_runner", [False, True])
async def test_a_resume_cancelled_while_queued_is_not_recovered(
    tmp_path: Path, before_runner: bool
) -> None:
    path = tmp_path / "c.db"
    write = RecordingTool("write")
    async with SqliteCheckpoints(path) as store:
        async with open_pool(checkpoints=store, max_concurrent=1) as pool:
            for spec in specs(write):
                pool.register(spec)
            with pytest.raises(TaskPaused) as info:
                await (await pool.submit("w", "go")).wait()
            state = info.value.state
            state.approve("c1", by="alice")
            hold = await pool.submit("hold", "hold the only slot")
            await trio.testing.wait_all_tasks_blocked()
            resumed = await pool.resume(state)  # claimed, queued behind hold
            if not before_runner:
                await trio.testing.wait_all_tasks_blocked()
            resumed.cancel()
            with pytest.raises(TaskCancelled):
                await resumed.wait()
            hold.cancel()
        rows = [(r.run_id, r.status) for r in await store.rows()]
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        for spec in specs(write):
            pool.register(spec)
        assert await pool.recover() == []
    assert write.calls == []
    assert rows == [("w/0001", "ended"), ("hold/0002", "ended")]
