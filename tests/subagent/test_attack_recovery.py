"""Attacks on crash recovery (``Pool.recover``, ``subagent._durable._recovery``) through a
checkpoint database edited by hand: each test failed before its fix.

The state column carries a digest; the other columns (name, in-flight call ids,
parent links) do not, and the table's schema is the file's own. An edit there must
not make recovery repeat a call the never-repeat rule holds back, nor freeze it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import agentcore
from agentcore import Checkpoint, CheckpointKind, Message, RunState, ToolCall
from agentcore._run._checkpoint import snapshot
from agentcore.testing import RecordingTool, ScriptedModel
from subagent import (
    CheckpointError,
    CheckpointRow,
    Spec,
    SqliteCheckpoints,
    SubagentTool,
    UnreadRow,
    open_pool,
)
from subagent._durable._recovery import recover


def _edit(path: Path, sql: str, *args: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql, args)


def _in_flight(run_id: str, agent: str, call: ToolCall) -> Checkpoint:
    # A ``call`` checkpoint of a run whose only call (``call``) is about to execute.
    messages = [Message("user", "go"), Message("assistant", "", tool_calls=(call,))]
    state = RunState.begin(messages, run_id=run_id, agent=agent)
    return Checkpoint(CheckpointKind.call, snapshot(state), (call.id,))


def _writer(tool: RecordingTool, name: str = "w") -> Spec:
    return Spec(name, model=ScriptedModel(lambda request: "done"), tools=[tool])


async def test_an_in_flight_call_removed_from_its_row_is_not_run_again(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with SqliteCheckpoints(path) as store:
        await store.write("w", None, None, _in_flight("w/0001", "w", ToolCall("c1", "write")))
    # The in-flight ids are outside the state's digest: drop the one in flight.
    _edit(path, "UPDATE checkpoints SET in_flight = '[]'")
    tool = RecordingTool("write")
    async with SqliteCheckpoints(path) as store, open_pool() as pool:
        pool.register(_writer(tool))
        recovered = await recover(pool, store)
    assert list(recovered) == []
    [(run_id, error)] = recovered.failed
    assert (run_id, type(error), str(error)) == ("w/0001", CheckpointError, (
        "checkpoint of run 'w/0001' does not match its state: call 'c1' has no result "
        "and is not among its in-flight calls (edited or damaged); refusing to recover it"
    ))
    assert tool.calls == []


async def test_the_honest_row_is_recovered_without_repeating_the_call(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with SqliteCheckpoints(path) as store:
        await store.write("w", None, None, _in_flight("w/0001", "w", ToolCall("c1", "write")))
    tool = RecordingTool("write")
    async with SqliteCheckpoints(path) as store, open_pool() as pool:
        pool.register(_writer(tool))
        [task] = await recover(pool, store)
        result = await task.wait()
    assert result.output == "done"
    assert tool.calls == []
    assert [m.content for m in result.messages if m.role == "tool"] == [
        agentcore.lowlevel.INTERRUPTED]


async def test_a_row_naming_another_spec_than_its_state_is_refused(tmp_path: Path) -> None:
    # lead -> writer, writer's "write" in flight; "safe" has an idempotent "write".
    path = tmp_path / "c.db"
    delegate = ToolCall("c1", "subagent", '{"agent": "writer", "task": "w"}')
    async with SqliteCheckpoints(path) as store:
        await store.write("lead", None, None, _in_flight("lead/0001", "lead", delegate))
        await store.write("writer", "lead/0001", "c1",
                          _in_flight("writer/0001", "writer", ToolCall("w1", "write")))
    # The name column is outside the digest: recover the writer's run by "safe"'s tools.
    _edit(path, "UPDATE checkpoints SET name = 'safe' WHERE run_id = 'writer/0001'")
    write = RecordingTool("write")
    async with SqliteCheckpoints(path) as store, open_pool() as pool:
        pool.register(Spec("lead", model=ScriptedModel(lambda request: "lead done"),
                           tools=[SubagentTool(pool)]))
        pool.register(_writer(write, "writer"))
        pool.register(_writer(RecordingTool("write", idempotent=True), "safe"))
        recovered = await recover(pool, store)
    assert list(recovered) == []
    [(run_id, error)] = recovered.failed  # the root's tree: the lead is not run either
    assert (run_id, type(error), str(error)) == ("lead/0001", CheckpointError, (
        "checkpoint of run 'writer/0001' names spec 'safe', but its state is a run of "
        "agent 'writer'; refusing to recover it"
    ))
    assert write.calls == []


def _dag(levels: int) -> list[CheckpointRow]:
    # Rows (as a heartbeat or a table without its key may give them), each run id at
    # every level twice: every row of a level is the child of both rows of the level
    # above (2**levels paths).
    two = ToolCall("a", "subagent", "{}"), ToolCall("b", "subagent", "{}")

    def row(level: int, parent: str | None, call: str | None) -> CheckpointRow:
        messages = [Message("user", "go"), Message("assistant", "", tool_calls=two)]
        state = RunState.begin(messages, run_id=f"L{level}", agent="w")
        return CheckpointRow(f"L{level}", "w", parent, call, "running", 1, ("a", "b"),
                             RunState.from_json(snapshot(state).to_json()))

    rows = [row(0, None, None)]
    return rows + [row(level, f"L{level - 1}", call)
                   for level in range(1, levels) for call in "ab"]


class _Rows(SqliteCheckpoints):
    async def recovering(self) -> list[CheckpointRow | UnreadRow]:
        return list(_dag(32))


async def test_a_run_id_stored_twice_is_refused_before_the_tree_is_walked() -> None:
    # 63 rows, 2**31 paths: walking them froze recovery (and filled memory).
    async with open_pool() as pool:
        pool.register(Spec("w", model=ScriptedModel([]), tools=[SubagentTool(pool)]))
        with pytest.raises(CheckpointError) as info:
            await recover(pool, _Rows(""))
    assert str(info.value) == (
        "the checkpoints hold run 'L1' twice (edited or damaged); refusing to recover them"
    )


SCHEMA_REFUSED = ("not a checkpoint database: its schema is not the one SqliteCheckpoints "
                  "creates (refusing to run its SQL)")


async def test_a_generated_column_is_refused_before_it_runs(tmp_path: Path) -> None:
    # Its SQL runs on every read: with 300000000 for 1000 here, a few hundred bytes of
    # file made each row read compute 300 MB (three rows: 10 s and 1.4 GB) before the
    # run id's length was checked.
    path = tmp_path / "gen.db"
    _edit(path, "CREATE TABLE checkpoints (k INTEGER PRIMARY KEY, run_id TEXT GENERATED "
                "ALWAYS AS (printf('%.*c', 1000, 'x')) VIRTUAL, name TEXT NOT NULL, "
                "parent TEXT, call_id TEXT, status TEXT NOT NULL, seq INTEGER NOT NULL, "
                "in_flight TEXT NOT NULL, state BLOB NOT NULL)")
    _edit(path, "INSERT INTO checkpoints (name, status, seq, in_flight, state) "
                "VALUES ('w', 'running', 1, '[]', '')")
    with pytest.raises(CheckpointError) as info:
        await SqliteCheckpoints(path).rows()
    assert str(info.value) == SCHEMA_REFUSED


async def test_a_trigger_is_refused_before_a_write_runs_it(tmp_path: Path) -> None:
    # A trigger runs its SQL in the writer thread at every checkpoint (one that never
    # ends would hold every run waiting for its commit, shielded).
    path = tmp_path / "trig.db"
    async with SqliteCheckpoints(path) as store:
        await store.write("w", None, None, _in_flight("w/0001", "w", ToolCall("c1", "write")))
    _edit(path, "CREATE TRIGGER grow AFTER UPDATE ON checkpoints BEGIN "
                "UPDATE checkpoints SET name = name || 'x'; END")
    store = SqliteCheckpoints(path)
    with pytest.raises(CheckpointError) as info:
        await store.write("w", None, None, _in_flight("w/0001", "w", ToolCall("c1", "write")))
    await store.aclose()
    assert str(info.value) == f"cannot open the checkpoint database: {SCHEMA_REFUSED}"
    with pytest.raises(CheckpointError) as info:
        await SqliteCheckpoints(path).rows()
    assert str(info.value) == SCHEMA_REFUSED
