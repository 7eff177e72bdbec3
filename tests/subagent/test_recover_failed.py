"""``Pool.recover`` recovers every tree it can: a tree with a row that cannot be read,
or that its checks refuse, is listed in ``Recovered.failed`` (its run id and a typed
error) and the others are recovered; the rows are read under the file's writer lock,
so a second recovery (here or in another process) is refused before it reads."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

import agentcore
from agentcore import (
    CallStatus,
    Checkpoint,
    CheckpointKind,
    Message,
    ModelRequest,
    ModelResponse,
    PendingCall,
    RunState,
    ToolCall,
)
from agentcore._run._checkpoint import snapshot
from agentcore.testing import RecordingTool, ScriptedModel
from subagent import (
    Budget,
    BudgetExceeded,
    CheckpointError,
    CheckpointRow,
    Spec,
    SqliteCheckpoints,
    SubagentTool,
    UnknownAgentError,
    UnreadRow,
    open_pool,
)
from subagent._durable._recovery import recover

REFUSED = ("checkpoint of run 'bad/0001' refused: not a RunState: the text is not a JSON "
           "object with a format and a version: JSON is malformed: invalid character (byte 0)")


def _edit(path: Path, sql: str, *args: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql, args)


def _in_flight(run_id: str, agent: str, call: ToolCall) -> Checkpoint:
    # A ``call`` checkpoint of a run whose only call (``call``) is about to execute.
    messages = [Message("user", "go"), Message("assistant", "", tool_calls=(call,))]
    state = RunState.begin(messages, run_id=run_id, agent=agent)
    return Checkpoint(CheckpointKind.call, snapshot(state), (call.id,))


def _writer(tool: RecordingTool, name: str) -> Spec:
    return Spec(name, model=ScriptedModel(lambda request: f"{name} done"), tools=[tool])


async def _two_roots(path: Path) -> None:
    # "bad" and "good": each a root with a call of "write" in flight.
    async with SqliteCheckpoints(path) as store:
        await store.write("bad", None, None,
                          _in_flight("bad/0001", "bad", ToolCall("c1", "write")))
        await store.write("good", None, None,
                          _in_flight("good/0001", "good", ToolCall("c2", "write")))


async def test_an_unreadable_root_is_listed_and_the_others_recovered(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    await _two_roots(path)
    _edit(path, "UPDATE checkpoints SET state = x'00ff' WHERE run_id = 'bad/0001'")
    bad, good = RecordingTool("write"), RecordingTool("write")
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(_writer(bad, "bad"))
        pool.register(_writer(good, "good"))
        recovered = await pool.recover()
        [task] = recovered
        assert (await task.wait()).output == "good done"
    [(run_id, error)] = recovered.failed
    assert (run_id, type(error), str(error)) == ("bad/0001", CheckpointError, REFUSED)
    assert (bad.calls, good.calls, recovered.paused) == ([], [], ())
    assert repr(recovered).endswith(f"paused=[], failed=[('bad/0001', {error!r})])")


async def test_an_unreadable_child_fails_its_whole_tree(tmp_path: Path) -> None:
    # lead -> writer (in flight); the writer's row cannot be read: recovering the lead
    # without it would take its delegation for an interrupted call.
    path = tmp_path / "c.db"
    delegate = ToolCall("d1", "subagent", '{"agent": "writer", "task": "w"}')
    async with SqliteCheckpoints(path) as store:
        await store.write("lead", None, None, _in_flight("lead/0001", "lead", delegate))
        await store.write("writer", "lead/0001", "d1",
                          _in_flight("bad/0001", "writer", ToolCall("w1", "write")))
        await store.write("good", None, None,
                          _in_flight("good/0001", "good", ToolCall("c2", "write")))
    _edit(path, "UPDATE checkpoints SET state = x'00ff' WHERE run_id = 'bad/0001'")
    write = RecordingTool("write")
    lead = ScriptedModel(lambda request: "lead done")
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(Spec("lead", model=lead, tools=[SubagentTool(pool)]))
        pool.register(_writer(write, "writer"))
        pool.register(_writer(RecordingTool("write"), "good"))
        recovered = await pool.recover()
        assert [(await t.wait()).output for t in recovered] == ["good done"]
    [(run_id, error)] = recovered.failed
    assert (run_id, str(error)) == ("lead/0001", REFUSED)
    assert (write.calls, lead.requests) == ([], [])
    rows = await SqliteCheckpoints(path).scan()
    assert [(r.run_id, type(r).__name__) for r in rows] == [
        ("lead/0001", "CheckpointRow"), ("bad/0001", "UnreadRow"),
        ("good/0001", "CheckpointRow")]
    assert rows[1] == UnreadRow("bad/0001", "lead/0001", rows[1].error)  # type: ignore[union-attr]
    with pytest.raises(CheckpointError) as info:
        await SqliteCheckpoints(path).rows()
    assert str(info.value) == REFUSED


async def test_a_root_of_an_unknown_spec_is_listed(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    await _two_roots(path)
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(_writer(RecordingTool("write"), "good"))
        recovered = await pool.recover()
        assert [(await t.wait()).output for t in recovered] == ["good done"]
    [(run_id, error)] = recovered.failed
    assert (run_id, type(error), str(error)) == (
        "bad/0001", UnknownAgentError, "unknown agent 'bad'; registered agents: good")


async def test_a_root_its_spec_cannot_resume_is_listed(tmp_path: Path) -> None:
    # A claimed resume of "bad" (its call approved) whose spec has no "write" tool any
    # more: agentcore refuses to resume it; "good" is recovered.
    path = tmp_path / "c.db"
    await _two_roots(path)
    call = ToolCall("c1", "write", "{}")
    messages = [Message("user", "go"), Message("assistant", "", tool_calls=(call,))]
    state = snapshot(RunState.begin(messages, run_id="bad/0001", agent="bad"))
    state.pending = [PendingCall(call, CallStatus.approved, "ok", "alice")]
    async with SqliteCheckpoints(path) as store:
        assert await store.claim("bad", state, "k") is True
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(_writer(RecordingTool("other"), "bad"))
        pool.register(_writer(RecordingTool("write"), "good"))
        recovered = await pool.recover()
        assert [(await t.wait()).output for t in recovered] == ["good done"]
    [(run_id, error)] = recovered.failed
    assert (run_id, type(error)) == ("bad/0001", agentcore.ResumeError)


def _row(run_id: str) -> CheckpointRow:
    state = snapshot(RunState.begin([Message("user", "go")], run_id=run_id, agent="good"))
    return CheckpointRow(run_id, "good", None, None, "running", 1, (), state)


class _Looped(SqliteCheckpoints):
    # Unread rows whose parent links make a loop (a hand-made file): each is listed.
    async def recovering(self) -> list[CheckpointRow | UnreadRow]:
        return [UnreadRow("a", "b", CheckpointError("a")),
                UnreadRow("b", "a", CheckpointError("b")), _row("good/0001")]


async def test_unread_rows_in_a_loop_end_their_walk() -> None:
    async with open_pool() as pool:
        pool.register(Spec("good", model=ScriptedModel(lambda request: "good done")))
        recovered = await recover(pool, _Looped(""))
        assert [(await t.wait()).output for t in recovered] == ["good done"]
    # Each walks up to the last run id before the loop closes: both are listed.
    assert [(run_id, str(e)) for run_id, e in recovered.failed] == [("a", "b"), ("b", "a")]


HOLD = """
import sys, trio
from subagent import SqliteCheckpoints
async def main():
    async with SqliteCheckpoints(sys.argv[1]) as store:
        print(len(await store.recovering()), flush=True)
        sys.stdin.readline()
trio.run(main)
"""


async def test_a_second_process_cannot_recover_the_same_runs(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    await _two_roots(path)
    with subprocess.Popen(  # noqa: ASYNC220 (its pipes are read in a thread)
        [sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdin is not None
        try:
            assert await trio.to_thread.run_sync(holder.stdout.readline) == "2\n"
            good = RecordingTool("write")
            async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
                pool.register(_writer(good, "good"))
                with pytest.raises(CheckpointError) as info:
                    await pool.recover()
                assert pool.statistics().accepted == 0
            assert str(info.value) == (
                "cannot open the checkpoint database: another SqliteCheckpoints is writing "
                "to it (here or in another process)")
        finally:
            holder.stdin.close()
        assert await trio.to_thread.run_sync(holder.wait) == 0
    # Once the other process let go, the runs are recovered here.
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(_writer(RecordingTool("write"), "bad"))
        pool.register(_writer(good, "good"))
        recovered = await pool.recover()
        assert [(await t.wait()).output for t in recovered] == ["bad done", "good done"]


async def test_a_closed_store_does_not_recover(tmp_path: Path) -> None:
    store = SqliteCheckpoints(tmp_path / "c.db")
    await store.aclose()
    with pytest.raises(CheckpointError) as info:
        await store.recovering()
    assert str(info.value) == "recovering from a closed SqliteCheckpoints"


class _Held:
    # A model whose every call waits for ``go``.
    def __init__(self) -> None:
        self.go = trio.Event()
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        await self.go.wait()
        return ModelResponse(Message("assistant", "held done"))


async def test_a_second_recover_does_not_resume_a_running_root_again(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    await _two_roots(path)
    held = _Held()
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(Spec("bad", model=held, tools=[RecordingTool("write")]))
        pool.register(Spec("good", model=held, tools=[RecordingTool("write")]))
        first = await pool.recover()
        await trio.testing.wait_all_tasks_blocked()
        # Both resumed runs wait in their model calls; their rows say running.
        assert [r.status for r in await store.rows()] == ["running", "running"]
        again = await pool.recover()
        assert (list(again), again.paused, again.failed) == ([], (), ())
        held.go.set()
        assert [(await t.wait()).output for t in first] == ["held done"] * 2
    assert (held.calls, pool.statistics().accepted) == (2, 2)


async def test_a_root_a_budget_refuses_is_listed_and_the_others_recovered(
    tmp_path: Path,
) -> None:
    # Any typed error resuming one root (here the pool's budget refusing the second)
    # is that tree's failure: before, it ended recover() and the first root's Task,
    # already queued, was never returned. (The spent pool budget stops that task too,
    # as it stops every task of the pool.)
    path = tmp_path / "c.db"
    await _two_roots(path)
    bad, good = RecordingTool("write"), RecordingTool("write")
    async with SqliteCheckpoints(path) as store, open_pool(
        checkpoints=store, budget=Budget(tasks=1)
    ) as pool:
        pool.register(_writer(bad, "bad"))
        pool.register(_writer(good, "good"))
        recovered = await pool.recover()
        [task] = recovered
        with pytest.raises(BudgetExceeded) as stopped:
            await task.wait()
    assert str(stopped.value).startswith(f"task {task.path[0]} stopped: the pool spent")
    [(run_id, error)] = recovered.failed
    assert (run_id, type(error)) == ("good/0001", BudgetExceeded)
    assert str(error).startswith("the pool spent its budget: tasks ")
    assert (bad.calls, good.calls) == ([], [])  # in flight at the crash: not repeated
    rows = await SqliteCheckpoints(path).rows()
    assert [(r.run_id, r.status) for r in rows] == [("bad/0001", "ended"),
                                                   ("good/0001", "running")]


async def test_an_orphan_whose_end_cannot_be_stored_is_listed(tmp_path: Path) -> None:
    # A background child whose parent had ended: reported orphaned, then its row
    # marked ended; a write that fails (the file locked by another writer) lists it
    # and the other trees are recovered (before, recover() raised).
    path = tmp_path / "c.db"
    async with SqliteCheckpoints(path) as store:
        await store.write("p", None, None, Checkpoint(
            CheckpointKind.ended, RunState.begin([], run_id="p/0001", agent="p")))
        await store.write("good", "p/0001", "s1",
                          _in_flight("p/0001/good/0002", "good", ToolCall("c1", "write")))
        await store.write("good", None, None,
                          _in_flight("good/0003", "good", ToolCall("c2", "write")))
    good = RecordingTool("write")
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        async with SqliteCheckpoints(path, busy_timeout=0.01) as store, open_pool(
            checkpoints=store
        ) as pool:
            pool.register(_writer(good, "good"))
            recovered = await pool.recover()
            other.execute("ROLLBACK")
            assert [(await t.wait()).output for t in recovered] == ["good done"]
    finally:
        other.close()
    [(run_id, error)] = recovered.failed
    assert (run_id, type(error), str(error)) == (
        "p/0001/good/0002", CheckpointError, "cannot store a checkpoint: database is locked")
    rows = await SqliteCheckpoints(path).rows()
    assert [(r.run_id, r.status) for r in rows] == [
        ("p/0001", "ended"), ("p/0001/good/0002", "running"), ("good/0003", "ended")]
