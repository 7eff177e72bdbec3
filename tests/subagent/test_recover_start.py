"""Each checkpointed task commits a ``start`` checkpoint when it is queued (issue 20,
"Other limits"): a task killed before its run's first checkpoint (queued behind a
full pool, or not past its start) is restarted from its input by ``recover()``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio

import agentcore
from agentcore import CheckpointKind, Message
from agentcore.testing import RecordingTool, ScriptedModel
from ledger import MemorySink
from subagent import (
    CheckpointError,
    EventKind,
    Pool,
    Spec,
    SqliteCheckpoints,
    Stream,
    Task,
    TaskFailed,
    open_pool,
)
from subagent._durable._rows import CheckpointRow, UnreadRow
from tests.agentcore._durable import make_tool, model

WORK = [[["c1", "write", 0], ["c2", "look", 0]], [["c3", "write", 0]]]
HOLD = [[["h1", "write", 3600]]]


def specs(audit: MemorySink | None = None, *, release: bool = False) -> list[Spec]:
    # "hold" holds the pool's only slot (its write takes an hour) until ``release``:
    # then its model answers at once, wherever its recovered state stands.
    tools = [make_tool("write", False), make_tool("look", True)]
    held = ScriptedModel(lambda _: Message("assistant", "released")) if release else model(HOLD)
    return [Spec("hold", model=held, tools=tools, audit=audit),
            Spec("w", model=model(WORK), tools=tools, audit=audit, system_prompt="be brief")]


def _copy(source: Path, target: Path) -> None:
    # What a SIGKILL would leave: every committed transaction, nothing else.
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


async def test_a_queued_task_killed_before_it_ran_is_restarted_from_its_input(
    tmp_path: Path,
) -> None:
    live, crashed = tmp_path / "live.db", tmp_path / "crashed.db"
    stream = Stream(64)
    async with SqliteCheckpoints(live) as store:
        async with open_pool(checkpoints=store, max_concurrent=1, events=stream) as pool:
            for spec in specs():
                pool.register(spec)
            await pool.submit("hold", "hold the only slot")
            await pool.submit("w", "go later", history=[Message("user", "earlier")])
            async for event in stream:
                # task_queued is announced once the start checkpoint is committed.
                if event.kind == EventKind.task_queued and event.path == ("w/0002",):
                    break
            _copy(live, crashed)
            pool.cancel()
        # Cancelled while queued: its row is ended, there is nothing to recover.
        assert [(r.run_id, r.status) for r in await store.rows()] == [
            ("hold/0001", "ended"), ("w/0002", "ended")]

    rows = await SqliteCheckpoints(crashed).rows()
    assert [(r.run_id, r.status, r.seq) for r in rows][1] == ("w/0002", "running", 1)
    start = rows[1].state
    assert start is not None
    assert [(m.role, m.content) for m in start.messages] == [
        ("system", "be brief\n\n" + _framing()), ("user", "earlier"), ("user", "go later")]
    assert (start.turn, start.pending, start.input) == (0, [], "go later")

    audit = MemorySink()
    async with SqliteCheckpoints(crashed) as store, open_pool(checkpoints=store) as pool:
        for spec in specs(audit, release=True):
            pool.register(spec)
        recovered = await pool.recover()
        assert [t.name for t in recovered] == ["hold", "w"]
        hold, again = recovered
        assert (await again.wait()).output == "done after 2 turns"
        assert (await hold.wait()).output == "released"
    kinds = [(e.kind, e.data.get("checkpoint")) for e in audit.entries
             if e.run_id == "w/0002" and e.kind in ("run_resumed", "prompt")]
    assert kinds == [("run_resumed", "w/0002@1"), ("prompt", None)]


def _framing() -> str:
    from subagent._pool._lifecycle import FRAMING

    return FRAMING


def test_the_start_checkpoint_is_the_opening_of_the_run() -> None:
    point = agentcore.lowlevel.start_checkpoint("sys", "go", run_id="r", agent="a", path=("r",),
                                       history=[Message("user", "before")])
    assert point.kind is CheckpointKind.start
    assert point.in_flight == ()
    state = point.state
    assert [(m.role, m.content) for m in state.messages] == [
        ("system", "sys"), ("user", "before"), ("user", "go")]
    assert (state.run_id, state.agent, state.path, state.paused) == ("r", "a", ("r",), True)


async def test_a_start_checkpoint_that_cannot_be_stored_fails_the_task(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    holder = SqliteCheckpoints(path)
    await holder.write("x", None, None, agentcore.Checkpoint(
        CheckpointKind.ended, agentcore.RunState.begin([], run_id="x")))
    try:
        async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
            for spec in specs():
                pool.register(spec)
            with pytest.raises(TaskFailed) as info:
                await (await pool.submit("w", "go")).wait()
            assert str(info.value).endswith(
                "CheckpointError: cannot open the checkpoint database: another "
                "SqliteCheckpoints is writing to it (here or in another process)")
            assert isinstance(info.value.__cause__, CheckpointError)
    finally:
        await holder.aclose()


async def test_a_task_its_submit_returned_is_in_the_file(tmp_path: Path) -> None:
    # With checkpoints, submit returns once the task's start checkpoint is committed:
    # a crash right after it returned (the file copied then) still recovers the task
    # (issue 32 item 5c). Before, its runner committed it later.
    live, crashed = tmp_path / "live.db", tmp_path / "crashed.db"
    async with SqliteCheckpoints(live) as store, open_pool(
        checkpoints=store, max_concurrent=1
    ) as pool:
        for spec in specs():
            pool.register(spec)
        await pool.submit("hold", "hold the only slot")
        await pool.submit("w", "go")  # queued behind hold
        _copy(live, crashed)
        pool.cancel()
    rows = await SqliteCheckpoints(crashed).rows()
    assert [(r.run_id, r.status, r.seq) for r in rows][1:] == [("w/0002", "running", 1)]
    async with SqliteCheckpoints(crashed) as store, open_pool(checkpoints=store) as pool:
        for spec in specs(release=True):
            pool.register(spec)
        recovered = await pool.recover()
        assert [(await t.wait()).output for t in recovered] == [
            "released", "done after 2 turns"]



async def test_recover_does_not_resume_the_pools_own_live_tasks(tmp_path: Path) -> None:
    # recover() in a pool whose tasks are running finds their rows running: they are
    # theirs, not a crash's. Before, it resumed each a second time (its calls ran
    # twice).
    path = tmp_path / "c.db"
    write = RecordingTool("write")
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(Spec("w", model=model([[["c1", "write", 0]]]), tools=[write]))
        task = await pool.submit("w", "go")
        assert await pool.recover() == []
        assert (await task.wait()).output == "done after 1 turns"
    assert len(write.calls) == 1


async def test_a_task_that_ends_while_recover_reads_is_not_resumed(tmp_path: Path) -> None:
    # The task's row is read running, then the task ends (its end checkpoint commits
    # beside the read) before recover() looks at the pool's live tasks: it was resumed
    # a second time (its call ran twice; 1 failure in a clean-clone CI run).
    path = tmp_path / "c.db"
    write = RecordingTool("write")
    ended: list[Task] = []

    class EndsWhileRead(SqliteCheckpoints):
        async def recovering(self) -> list[CheckpointRow | UnreadRow]:
            rows = await super().recovering()
            await ended[0].wait()
            return rows

    async with EndsWhileRead(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(Spec("w", model=model([[["c1", "write", 0]]]), tools=[write]))
        ended.append(await pool.submit("w", "go"))
        recovered = await pool.recover()
        assert (list(recovered), recovered.paused, recovered.failed) == ([], (), ())
    assert len(write.calls) == 1


@pytest.mark.parametrize("ends", [True, False])
async def test_a_task_submitted_while_recover_reads_is_not_resumed(
    tmp_path: Path, ends: bool
) -> None:
    # The task is submitted once recover() has begun, its row is read running (its
    # call in flight), and it ends (or not) before the read returns: ended, it was
    # live neither before the read nor after it, and it was resumed a second time
    # (its call ran twice).
    path = tmp_path / "c.db"
    started, go = trio.Event(), trio.Event()

    async def held(arguments: str) -> str:
        started.set()
        await go.wait()
        return "written"

    write = RecordingTool("write", held)
    pools: list[Pool] = []
    tasks: list[Task] = []

    class SubmitsWhileRead(SqliteCheckpoints):
        async def recovering(self) -> list[CheckpointRow | UnreadRow]:
            tasks.append(await pools[0].submit("w", "go"))
            await started.wait()
            rows = await super().recovering()
            [row] = rows
            assert isinstance(row, CheckpointRow)
            assert (row.run_id, row.status) == ("w/0001", "running")
            if ends:
                go.set()
                await tasks[0].wait()
            return rows

    async with SubmitsWhileRead(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(Spec("w", model=model([[["c1", "write", 0]]]), tools=[write]))
        pools.append(pool)
        recovered = await pool.recover()
        assert (list(recovered), recovered.paused, recovered.failed) == ([], (), ())
        go.set()
        assert (await tasks[0].wait()).output == "done after 1 turns"
    assert len(write.calls) == 1


async def test_a_task_submitted_before_recover_keeps_the_crashed_row(tmp_path: Path) -> None:
    # A crash left w/0001 queued; a new pool on the file submits a task before it
    # recovers: the new task is numbered past the file's runs (w/0002) instead of
    # taking w/0001's row (its start checkpoint overwrote the crashed task's, which
    # was then lost).
    path = tmp_path / "c.db"
    async with SqliteCheckpoints(path) as store:
        point = agentcore.lowlevel.start_checkpoint("", "go", run_id="w/0001", agent="w",
                                           path=("w/0001",))
        await store.write("w", None, None, point)
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        for spec in specs(release=True):
            pool.register(spec)
        fresh = await pool.submit("w", "new work")
        [again] = await pool.recover()
        assert (fresh.path, again.path) == (("w/0002",), ("w/0001",))
        results = [await t.wait() for t in (fresh, again)]
    assert [(r.messages[0].content, r.output) for r in results] == [
        ("new work", "done after 2 turns"), ("go", "done after 2 turns")]
