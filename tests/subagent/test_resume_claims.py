"""``Pool.resume``'s claim in the checkpoints: undone when the resume is not queued
(the pool closed, or the resume cancelled while the queue is full), so the same
state can be resumed again and a recovery does not run it; and the ``resumed``
table bounded (``max_claims``, the newest kept, and those of running claimed rows)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import trio
import trio.testing

from agentcore import (
    Checkpoint,
    CheckpointKind,
    Message,
    ModelRequest,
    ModelResponse,
    RunState,
    ToolCall,
)
from agentcore.testing import ScriptedModel
from subagent import (
    AlreadyResumedError,
    Pool,
    PoolClosedError,
    Spec,
    SqliteCheckpoints,
    SubagentTool,
    TaskPaused,
    open_pool,
)
from subagent._durable._claims import resume_key
from subagent.limits import MAX_RESUME_CLAIMS

from .test_recover_paused import asks_counted


def _table(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


async def _paused(path: Path) -> str:
    # A run of "asks" paused for approval of c1, its row in ``path``; its state's JSON.
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(asks_counted([]))
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("asks", "go")).wait()
    return info.value.state.to_json()


ROWS = "SELECT run_id, status, seq, state FROM checkpoints ORDER BY rowid"


async def test_a_resume_into_a_closed_pool_undoes_its_claim(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    text = await _paused(path)
    before = _table(path, ROWS)
    ran: list[str] = []
    async with SqliteCheckpoints(path) as store:
        async with open_pool(checkpoints=store) as pool:
            pool.register(asks_counted(ran))
        state = RunState.from_json(text)
        state.approve("c1", by="alice")
        with pytest.raises(PoolClosedError):
            await pool.resume(state)
        assert store.commits == 2  # the claim and its undoing
    # The row as it was (paused, same checkpoint), no record of a resume.
    assert (_table(path, ROWS), _table(path, "SELECT * FROM resumed")) == (before, [])
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(asks_counted(ran))
        assert [t.name for t in (await pool.recover()).paused] == ["asks"]
        result = await (await pool.resume(state)).wait()
    assert (result.output, ran) == ("done after 2 turns", ['{"s": 0}', '{"s": 0}'])


class _Held:
    # A model whose every call waits for ``go``.
    def __init__(self) -> None:
        self.go = trio.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await self.go.wait()
        return ModelResponse(Message("assistant", "held done"))


async def test_a_resume_cancelled_while_the_queue_is_full_undoes_its_claim(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    text = await _paused(path)
    before = _table(path, ROWS)
    held = _Held()
    ran: list[str] = []
    async with SqliteCheckpoints(path) as store, \
            open_pool(checkpoints=store, max_concurrent=1, max_queued=1) as pool:
        pool.register(asks_counted(ran))
        pool.register(Spec("held", model=held))
        running = await pool.submit("held", "a")
        queued = await pool.submit("held", "b")
        state = RunState.from_json(text)
        state.approve("c1", by="alice")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pool.resume, state)
            while pool.statistics().waiting_submitters == 0:
                await trio.testing.wait_all_tasks_blocked()
            # Claimed (the row holds the answered state), parked for a queue slot.
            assert _table(path, "SELECT run_id FROM resumed") == [("asks/0001",)]
            nursery.cancel_scope.cancel()
        assert (_table(path, ROWS)[0], _table(path, "SELECT * FROM resumed")) == (
            before[0], [])
        held.go.set()
        assert [(await t.wait()).output for t in (running, queued)] == ["held done"] * 2
        # Not claimed: the same state is resumed now, once.
        assert (await (await pool.resume(state)).wait()).output == "done after 2 turns"
        again = RunState.from_json(text)
        again.approve("c1", by="alice")
        with pytest.raises(AlreadyResumedError):
            await pool.resume(again)
    assert ran == ['{"s": 0}', '{"s": 0}']


def _state(run_id: str) -> RunState:
    return RunState.begin([Message("user", "go")], run_id=run_id, agent="w")


async def test_the_resume_records_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    assert MAX_RESUME_CLAIMS == 100_000
    async with SqliteCheckpoints(path, max_claims=2) as store:
        assert store.max_claims == 2
        # r0 stays running (a claimed resume a crash would recover): kept past the cap.
        assert await store.claim("w", _state("r0"), "k") is True
        for k in range(1, 5):
            state = _state(f"r{k}")
            assert await store.claim("w", state, "k") is True
            await store.write("w", None, None, Checkpoint(CheckpointKind.ended, state))
        # The newest two of the ended runs' records, and the running one's.
        assert sorted(_table(path, "SELECT run_id FROM resumed")) == [
            ("r0",), ("r3",), ("r4",)]
        assert await store.claim("w", _state("r4"), "k") is False
        assert await store.claim("w", _state("r0"), "k") is False
        # A dropped record: that state can be claimed again (the documented bound).
        assert await store.claim("w", _state("r1"), "k") is True
        [r0] = [row for row in await store.rows() if row.run_id == "r0"]
        assert (r0.status, r0.claimed) == ("running", True)


async def test_an_undone_claim_of_a_run_without_a_row_leaves_none(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    state = _state("r0")
    async with SqliteCheckpoints(path) as store:
        claim = await store.take_claim("w", state, resume_key(state))
        assert claim is not None
        assert await store.take_claim("w", state, resume_key(state)) is None
        await store.unclaim(claim)
        assert (await store.rows(), _table(path, "SELECT * FROM resumed")) == ([], [])
        assert await store.claim("w", state, resume_key(state)) is True


def _boss(pool: Pool) -> Spec:
    # Delegates "go" to asks (waited for, call d1), then answers with its output.
    def reply(request: ModelRequest) -> Message:
        if not any(m.role == "assistant" for m in request.messages):
            call = ToolCall("d1", "subagent", json.dumps({"agent": "asks", "task": "go"}))
            return Message("assistant", "delegating", tool_calls=[call])
        output = json.loads(request.messages[-1].content)["output"]
        return Message("assistant", f"boss got {output}")

    return Spec("boss", model=ScriptedModel(reply), tools=[SubagentTool(pool)])


async def test_an_undone_claim_puts_back_the_rows_of_the_paused_subagents_too(
    tmp_path: Path,
) -> None:
    # The claim of a tree whose subagent paused writes the subagent's answered state
    # into its own row too (issue 32); a resume that is not queued puts that row back
    # as well: a recovery then lists the tree unanswered, and it is resumed once.
    path = tmp_path / "c.db"
    ran: list[str] = []
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(asks_counted(ran))
        pool.register(_boss(pool))
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("boss", "go")).wait()
    text = info.value.state.to_json()
    before = _table(path, ROWS)
    assert [(run_id, status) for run_id, status, _, _ in before] == [
        ("boss/0001", "paused"), ("boss/0001/asks/0002", "paused")]
    async with SqliteCheckpoints(path) as store:
        async with open_pool(checkpoints=store) as pool:
            pool.register(asks_counted(ran))
            pool.register(_boss(pool))
        state = RunState.from_json(text)
        state.approve("c1", path=("boss/0001", "asks/0002"), by="alice")
        with pytest.raises(PoolClosedError):
            await pool.resume(state)
        assert store.commits == 2  # the claim and its undoing
    assert (_table(path, ROWS), _table(path, "SELECT * FROM resumed")) == (before, [])
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(asks_counted(ran))
        pool.register(_boss(pool))
        recovered = await pool.recover()
        assert list(recovered) == []
        [tree] = recovered.paused
        assert [(a.path, a.call_id) for a in tree.state.pending_approvals] == [
            (("boss/0001", "asks/0002"), "c1")]
        tree.state.approve("c1", path=("boss/0001", "asks/0002"), by="alice")
        result = await (await pool.resume(tree.state, name=tree.name)).wait()
        assert result.output == "boss got done after 2 turns"
        again = RunState.from_json(text)
        again.approve("c1", path=("boss/0001", "asks/0002"), by="alice")
        with pytest.raises(AlreadyResumedError):
            await pool.resume(again)
        after = await pool.recover()
        assert (list(after), after.paused, after.failed) == ([], (), ())
    assert ran == ['{"s": 0}', '{"s": 0}']  # c1 (approved) and c3, once each
