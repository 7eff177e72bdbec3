"""SqliteCheckpoints (issue 20 item 3): what a pool stores, and the file read back as
hostile input (size and row caps, digest, malformed rows, one writer)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
import trio

import agentcore
import subagent
from agentcore import Checkpoint, CheckpointKind, RunState
from agentcore._run._checkpoint import snapshot
from agentcore.testing import ScriptedModel, tool_call_reply
from subagent import (
    CheckpointError,
    CheckpointRow,
    Spec,
    SqliteCheckpoints,
    TaskError,
    open_pool,
)
from subagent._durable._writes import connect
from tests.agentcore._durable import make_tool, model

WORK = [[["c1", "write", 0], ["c2", "look", 0]], [["c3", "write", 0]]]


def spec() -> Spec:
    return Spec("w", model=model(WORK), tools=[make_tool("write", False),
                                              make_tool("look", True)])


async def test_a_pool_commits_each_turn_each_mutating_call_and_the_end(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.db"
    async with SqliteCheckpoints(path) as store:
        async with open_pool(checkpoints=store) as pool:
            pool.register(spec())
            result = await (await pool.submit("w", "go")).wait()
        assert result.output == "done after 2 turns"
        # start (queued), turn 0, c1, turn 1, c3, turn 2, the end
        assert store.commits == 7
        assert await store.rows() == [
            CheckpointRow("w/0001", "w", None, None, "ended", 7, (), None)
        ]
        assert await pool.recover() == []
    assert oct(path.stat().st_mode & 0o777) == "0o600"


async def running(path: Path, messages: int = 1) -> SqliteCheckpoints:
    # A store holding one running checkpoint of run "r/0001" (as if it crashed).
    state = RunState.begin([agentcore.Message("user", "x" * messages)], run_id="r/0001",
                           agent="w")
    store = SqliteCheckpoints(path)
    snap = agentcore.Checkpoint(CheckpointKind.turn, snapshot(state))
    await store.write("w", None, None, snap)
    return store


async def test_a_running_checkpoint_reads_back(tmp_path: Path) -> None:
    store = await running(tmp_path / "c.db")
    [row] = await store.rows()
    await store.aclose()
    assert (row.run_id, row.status, row.seq, row.in_flight, row.checkpoint) == (
        "r/0001", "running", 1, (), "r/0001@1")
    assert row.state is not None and row.state.paused
    assert [m.content for m in row.state.messages] == ["x"]


def _edit(path: Path, sql: str, *args: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql, args)


async def test_an_edited_state_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    await (await running(path)).aclose()
    _edit(path, "UPDATE checkpoints SET state = replace(state, '\"x\"', '\"y\"')")
    with pytest.raises(CheckpointError) as info:
        await SqliteCheckpoints(path).rows()
    assert str(info.value) == (
        "checkpoint of run 'r/0001' refused: RunState does not match its digest: it was "
        "changed after it was written (edited by hand or damaged); refusing to resume it"
    )


async def test_a_state_past_the_size_cap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    await (await running(path, 2000)).aclose()
    with pytest.raises(CheckpointError) as info:
        await SqliteCheckpoints(path, max_state_bytes=1000).rows()
    assert str(info.value) == "checkpoint of run 'r/0001' too large (more than 1000 bytes)"


async def test_too_many_rows_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    await (await running(path)).aclose()
    _edit(path, "INSERT INTO checkpoints SELECT 'r/0002', name, parent, call_id, status, "
                "seq, in_flight, state FROM checkpoints")
    with pytest.raises(CheckpointError) as info:
        await SqliteCheckpoints(path, max_rows=1).rows()
    assert str(info.value) == "the checkpoint database has more than 1 rows (max_rows)"


@pytest.mark.parametrize(("sql", "message"), [
    ("UPDATE checkpoints SET status = 'done'",
     "malformed checkpoint of run 'r/0001': bad status or counter"),
    ("UPDATE checkpoints SET in_flight = '[1]'",
     "malformed checkpoint of run 'r/0001': bad in-flight call ids"),
    ("UPDATE checkpoints SET name = x'01'",
     "malformed checkpoint of run 'r/0001': bad text column"),
    ("UPDATE checkpoints SET run_id = 'r/0002'",
     "malformed checkpoint of run 'r/0002': its state is another run's"),
    ("UPDATE checkpoints SET state = x'00ff'",
     "checkpoint of run 'r/0001' refused: not a RunState: the text is not a JSON object "
     "with a format and a version: JSON is malformed: invalid character (byte 0)"),
])
async def test_a_malformed_row_is_refused(tmp_path: Path, sql: str, message: str) -> None:
    path = tmp_path / "c.db"
    await (await running(path)).aclose()
    _edit(path, sql)
    with pytest.raises(CheckpointError) as info:
        await SqliteCheckpoints(path).rows()
    assert str(info.value) == message


async def test_not_a_checkpoint_database(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    _edit(path, "CREATE TABLE entries (x)")
    with pytest.raises(CheckpointError) as info:
        await SqliteCheckpoints(path).rows()
    assert str(info.value) == "not a checkpoint database: no checkpoints table"
    with pytest.raises(CheckpointError) as info:
        await SqliteCheckpoints(tmp_path / "missing.db").rows()
    assert str(info.value) == "no checkpoint database at the given path"


async def test_one_writer_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    first = await running(path)
    second = SqliteCheckpoints(path)
    point = Checkpoint(CheckpointKind.ended, RunState.begin([], run_id="r/0001"))
    with pytest.raises(CheckpointError) as info:
        await second.write("w", None, None, point)
    assert str(info.value) == (
        "cannot open the checkpoint database: another SqliteCheckpoints is writing to it "
        "(here or in another process)"
    )
    await first.aclose()
    await second.aclose()


@pytest.mark.parametrize(("kind", "what"), [("fifo", "a FIFO"), ("directory", "a directory")])
async def test_a_path_that_is_no_regular_file_is_refused(
    tmp_path: Path, kind: str, what: str
) -> None:
    # Issue 33: a checkpoint that returned is committed; nothing commits to a FIFO.
    path = tmp_path / "c.db"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    store = SqliteCheckpoints(path)
    point = Checkpoint(CheckpointKind.ended, RunState.begin([], run_id="r/0001"))
    with pytest.raises(CheckpointError) as info:
        await store.write("w", None, None, point)
    assert str(info.value) == (
        f"cannot open the checkpoint database: it is {what}, not a regular file")
    await store.aclose()
    assert os.listdir(tmp_path) == ["c.db"]  # no lock file beside it


@pytest.mark.parametrize(("kind", "cause"), [
    ("fifo", "it is a FIFO, not a regular file"),
    ("regular", "it was replaced while it was opened"),
])
async def test_a_file_swapped_in_before_sqlite_opens_it_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, cause: str
) -> None:
    # Issue 33: a FIFO (a real one) or another file put at the path after the store
    # checked it, before SQLite opens it (inside the connect step). Before: the FIFO
    # failed with SQLite's raw "disk I/O error"; the other file was taken.
    path = tmp_path / "c.db"

    def swapped(where: str, timeout: float) -> sqlite3.Connection:
        if kind == "fifo":
            path.unlink()
            os.mkfifo(path)
        else:
            other = tmp_path / "other"
            other.touch()  # made while the checked file exists: another inode
            other.replace(path)
        return connect(where, timeout)

    monkeypatch.setattr("subagent._durable._store.connect", swapped)
    store = SqliteCheckpoints(path)
    point = Checkpoint(CheckpointKind.ended, RunState.begin([], run_id="r/0001"))
    with pytest.raises(CheckpointError) as info:
        await store.write("w", None, None, point)
    assert str(info.value) == f"cannot open the checkpoint database: {cause}"
    await store.aclose()


async def test_recover_needs_checkpoints() -> None:
    async with open_pool() as pool:
        with pytest.raises(CheckpointError) as info:
            await pool.recover()
    assert str(info.value) == "this pool has no checkpoints: open_pool(checkpoints=...)"


async def test_a_timed_out_task_ended_and_a_paused_one_keeps_its_state(tmp_path: Path) -> None:
    from tests.agentcore._durable import gate

    slow = [[["c1", "write", 60]]]
    async with SqliteCheckpoints(tmp_path / "c.db") as store:
        async with open_pool(checkpoints=store) as pool:
            pool.register(Spec("slow", model=model(slow), timeout=0.2,
                               tools=[make_tool("write", False)]))
            pool.register(Spec("asks", model=model(WORK), gate=gate("c1", None),
                               tools=[make_tool("write", False), make_tool("look", True)]))
            with pytest.raises(subagent.TaskTimeout):
                await (await pool.submit("slow", "go")).wait()
            with pytest.raises(subagent.TaskPaused):
                await (await pool.submit("asks", "go")).wait()
        rows = await store.rows()
        assert [(r.run_id, r.status, r.in_flight) for r in rows] == [
            ("slow/0001", "ended", ()), ("asks/0002", "paused", ())]
        paused = rows[1].state
        assert paused is not None
        assert [a.call_id for a in paused.pending_approvals] == ["c1"]
        assert await pool.recover() == []  # neither is unfinished


@pytest.mark.parametrize("end", ["cancelled", "failed"])
async def test_a_store_locked_during_a_run_does_not_take_the_pool_down(
    tmp_path: Path, end: str
) -> None:
    # Issue 33 (found by the Temporal cells: a worker closed under a hung server): the
    # run's end checkpoint could not be stored, and its CheckpointError left the run's
    # task and took the pool, and every other task in it, down.
    path = tmp_path / "ckpt.db"
    started, go = trio.Event(), trio.Event()

    async def wait(arguments: str) -> str:
        started.set()
        await go.wait()
        return "went"

    tool = agentcore.FunctionTool("wait", "Wait.", {"type": "object"}, wait, read_only=True)
    async with (
        SqliteCheckpoints(path, busy_timeout=0.1) as store,
        open_pool(checkpoints=store) as pool,
    ):
        pool.register(Spec("victim", model=ScriptedModel([
            tool_call_reply("wait"), agentcore.Message("assistant", "done")]),
            tools=(tool,), gate=agentcore.allow_all))
        pool.register(Spec("other", model=ScriptedModel(
            [agentcore.Message("assistant", "unaffected")])))
        victim = await pool.submit("victim", "go")
        await started.wait()
        other = sqlite3.connect(path, isolation_level=None, timeout=0)
        other.execute("BEGIN EXCLUSIVE")
        if end == "cancelled":
            victim.cancel()
        else:
            go.set()
        with pytest.raises(TaskError) as caught:
            await victim.wait()
        other.close()
        assert (await (await pool.submit("other", "go")).wait()).output == "unaffected"
    expected = ("TaskCancelled: task victim/0001 was cancelled" if end == "cancelled" else
                "TaskFailed: task victim/0001 failed: CheckpointError: cannot store a "
                "checkpoint: database is locked")
    assert f"{type(caught.value).__name__}: {caught.value}" == expected


async def test_a_pause_that_cannot_be_stored_fails_its_task_not_the_pool(
    tmp_path: Path
) -> None:
    # Issue 33 (the Temporal cells' report: a run's paused end checkpoint that could not
    # be stored left the run's task as an ExceptionGroup and took the pool down). The
    # store is locked while the gate defers the write: the task fails with the error,
    # the pool goes on, and the row keeps the run's last checkpoint, from which a
    # recovery runs it to the same pause (the write never ran).
    path = tmp_path / "ckpt.db"
    locks: list[sqlite3.Connection] = []
    writes: list[str] = []

    async def decide(request: agentcore.GateRequest) -> agentcore.GateDecision:
        await trio.lowlevel.checkpoint()
        if not locks:
            locks.append(sqlite3.connect(path, isolation_level=None, timeout=0))
            locks[0].execute("BEGIN EXCLUSIVE")
        return agentcore.GateDecision.defer("ask a human")

    async def write(arguments: str) -> str:
        writes.append(arguments)
        return "written"

    def register(pool: subagent.Pool) -> None:
        pool.register(Spec("victim", model=ScriptedModel([
            tool_call_reply("write", id="w1"), agentcore.Message("assistant", "done")]),
            tools=(agentcore.FunctionTool("write", "Write.", {"type": "object"}, write),),
            gate=decide))
        pool.register(Spec("other", model=ScriptedModel(
            [agentcore.Message("assistant", "unaffected")])))

    async with (
        SqliteCheckpoints(path, busy_timeout=0.1) as store,
        open_pool(checkpoints=store) as pool,
    ):
        register(pool)
        with pytest.raises(TaskError) as caught:
            await (await pool.submit("victim", "go")).wait()
        locks[0].close()
        assert (await (await pool.submit("other", "go")).wait()).output == "unaffected"
    assert f"{type(caught.value).__name__}: {caught.value}" == (
        "TaskFailed: task victim/0001 failed: CheckpointError: cannot store a "
        "checkpoint: database is locked")
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        register(pool)
        [task] = await pool.recover()
        with pytest.raises(subagent.TaskPaused) as paused:
            await task.wait()
    assert [a.call_id for a in paused.value.state.pending_approvals] == ["w1"]
    assert writes == []
