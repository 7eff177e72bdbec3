"""Pool.recover() reports the trees that wait for a human (issue 20, "Other limits"):
a root paused before the crash, and a running root whose subagent had paused, are
listed in ``Recovered.paused`` instead of being skipped without notice."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import agentcore
from agentcore import Checkpoint, CheckpointKind, Message, RunState, ToolCall
from agentcore._run._checkpoint import snapshot
from subagent import (
    AlreadyResumedError,
    CheckpointError,
    PausedTree,
    Recovered,
    Spec,
    SqliteCheckpoints,
    TaskPaused,
    open_pool,
)
from subagent._durable._claims import resume_key
from tests.agentcore._durable import gate, make_tool, model

WORK = [[["c1", "write", 0], ["c2", "look", 0]], [["c3", "write", 0]]]


def asks() -> Spec:
    return Spec("asks", model=model(WORK), gate=gate("c1", None),
                tools=[make_tool("write", False), make_tool("look", True)])


async def test_a_root_paused_before_the_crash_is_listed_then_resumed(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(asks())
        with pytest.raises(TaskPaused):
            await (await pool.submit("asks", "go")).wait()
    # A new process: the paused tree is reported, nothing is resumed.
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(asks())
        recovered = await pool.recover()
        assert isinstance(recovered, Recovered)
        assert list(recovered) == []
        [tree] = recovered.paused
        assert (tree.name, tree.checkpoint) == ("asks", "asks/0001@3")
        assert [(a.call_id, a.tool, a.reason) for a in tree.state.pending_approvals] == [
            ("c1", "write", "ask a human")]
        tree.state.approve("c1", by="alice")
        result = await (await pool.resume(tree.state, name=tree.name)).wait()
        assert result.output == "done after 2 turns"
        # Resumed and ended: nothing is left to report.
        again = await pool.recover()
        assert (list(again), again.paused) == ([], ())


def _boss_snapshot() -> RunState:
    # The root "boss" at its call checkpoint: it delegated call d1 (in flight).
    call = ToolCall("d1", "subagent", '{"agent": "asks", "task": "go"}')
    state = RunState.begin(
        [Message("user", "go"), Message("assistant", "delegating", tool_calls=[call])],
        run_id="boss/0001", agent="boss", path=("boss/0001",), input="go",
    )
    return snapshot(state)


async def test_a_running_root_with_a_paused_subagent_is_listed(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(asks())
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("asks", "go")).wait()
        child = info.value.state
        # As if the child had been delegated by boss's call d1, and the process was
        # killed before the pause reached boss: boss's last checkpoint is "call".
        await store.write("boss", None, None,
                          Checkpoint(CheckpointKind.call, _boss_snapshot(), ("d1",)))
        await store.write("asks", "boss/0001", "d1", Checkpoint(CheckpointKind.paused, child))
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(asks())
        pool.register(Spec("boss", model=model([]), tools=[make_tool("look", True)]))
        recovered = await pool.recover()
        assert list(recovered) == []
        # "asks/0001" is boss's child now (its row got the parent link): not a root.
        assert [(t.name, t.checkpoint) for t in recovered.paused] == [("boss", "boss/0001@1")]
        [tree] = recovered.paused
        state = tree.state
        assert [(a.path, a.call_id) for a in state.pending_approvals] == [
            (("asks/0001",), "c1")]
        assert [(p.call.id, p.status, p.reason) for p in state.pending] == [
            ("d1", agentcore.CallStatus.delegated, "recovered")]
        assert state.checkpoint == "boss/0001@1"
        # An answer is stored as the tree's row, paused (it was running): the next
        # recovery lists the tree with it, the same recovered tree otherwise.
        await pool.answer(state, "c1", allow=True, by="ann", name="boss")
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(asks())
        pool.register(Spec("boss", model=model([]), tools=[make_tool("look", True)]))
        recovered = await pool.recover()
        assert list(recovered) == []
        [tree] = recovered.paused
        assert (tree.name, tree.checkpoint) == ("boss", "boss/0001@2")
        assert tree.state.pending_approvals == ()
        [kid] = tree.state.children
        assert [(p.call.id, p.status, p.by) for p in kid.pending if p.call.id == "c1"] == [
            ("c1", agentcore.CallStatus.approved, "ann")]
        assert [(p.call.id, p.status) for p in tree.state.pending] == [
            ("d1", agentcore.CallStatus.delegated)]


async def test_recovered_compares_as_the_list_of_its_tasks() -> None:
    assert Recovered() == []
    assert Recovered([], [PausedTree("w", RunState.begin([]), "w@1")]) == []
    assert repr(Recovered()) == "Recovered([], paused=[], failed=[])"


def counting_write(ran: list[str]) -> agentcore.FunctionTool:
    async def run(arguments: str) -> str:
        await trio.lowlevel.checkpoint()
        ran.append(arguments)
        return "written"

    return agentcore.FunctionTool("write", "write", {"type": "object"}, run)


def asks_counted(ran: list[str]) -> Spec:
    return Spec("asks", model=model(WORK), gate=gate("c1", None),
                tools=[counting_write(ran), make_tool("look", True)])


async def test_the_same_stored_state_is_not_resumed_twice(tmp_path: Path) -> None:
    ran: list[str] = []
    async with SqliteCheckpoints(tmp_path / "c.db") as store, \
            open_pool(checkpoints=store) as pool:
        pool.register(asks_counted(ran))
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("asks", "go")).wait()
        text = info.value.state.to_json()
        first = RunState.from_json(text)
        first.approve("c1", by="alice")
        assert (await (await pool.resume(first)).wait()).output == "done after 2 turns"
        assert ran == ['{"s": 0}', '{"s": 0}']  # c1 (approved), then c3
        for answer in ("approve", "deny"):
            again = RunState.from_json(text)
            if answer == "approve":
                again.approve("c1")
            else:
                again.deny("c1", "no")
            with pytest.raises(AlreadyResumedError) as refused:
                await pool.resume(again)
            assert str(refused.value) == (
                "the paused run 'asks/0001' was resumed already from this state (the "
                "pool's checkpoints record it): resuming it again would run its approved "
                "calls again")
        assert ran == ['{"s": 0}', '{"s": 0}']
        assert pool.statistics().accepted == 2


async def test_a_crash_right_after_the_resume_was_recorded_is_recovered(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    ran: list[str] = []
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(asks_counted(ran))
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("asks", "go")).wait()
        state = info.value.state
        state.approve("c1", by="alice")
        # What Pool.resume records first; the process dies before the task runs.
        assert await store.claim("asks", state, resume_key(state)) is True
        assert await store.claim("asks", state, resume_key(state)) is False
    assert ran == []
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(asks_counted(ran))
        recovered = await pool.recover()
        assert recovered.paused == ()
        [task] = recovered
        assert (await task.wait()).output == "done after 2 turns"
    assert ran == ['{"s": 0}', '{"s": 0}']  # the approved c1 ran once, then c3


def test_the_resume_key_ignores_the_answers() -> None:
    state = RunState.begin([Message("user", "go")], run_id="r")
    before = resume_key(state)
    assert before.startswith("sha256:") and len(before) == 71
    state.messages.append(Message("assistant", "more"))
    assert resume_key(state) != before


async def test_a_file_written_before_resumes_were_claimed_is_still_read(tmp_path: Path) -> None:
    import sqlite3

    from subagent._durable._schema import UPSERT

    path = tmp_path / "old.db"
    state = _boss_snapshot()
    with sqlite3.connect(path) as conn:
        # The schema of files written before the ``resumed`` table.
        conn.executescript(
            "CREATE TABLE checkpoints (run_id TEXT PRIMARY KEY, name TEXT NOT NULL, "
            "parent TEXT, call_id TEXT, status TEXT NOT NULL, seq INTEGER NOT NULL, "
            "in_flight TEXT NOT NULL, state BLOB NOT NULL);")
        conn.execute(UPSERT, ("boss/0001", "boss", None, None, "running", '["d1"]',
                              state.to_json()))
    [row] = await SqliteCheckpoints(path).rows()
    assert (row.run_id, row.status) == ("boss/0001", "running")
    async with SqliteCheckpoints(path) as store:  # its writer adds the table
        assert await store.claim("boss", state, "k") is True
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE resumed")
        conn.execute("CREATE TABLE resumed (run_id TEXT, key TEXT, extra TEXT, "
                     "PRIMARY KEY (run_id, key))")
    with pytest.raises(CheckpointError) as info:
        await SqliteCheckpoints(path).rows()
    assert str(info.value) == ("not a checkpoint database: its schema is not the one "
                               "SqliteCheckpoints creates (refusing to run its SQL)")
