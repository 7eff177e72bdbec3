"""Pool.answer (issue 36 review): an answer to a paused tree is stored when it
returns, in the checkpoints and the ledger, and a recovery lists the tree with it; an
answer to no call, or to a state resumed already, is refused and changes nothing."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import attrs
import pytest
import trio

import agentcore
from agentcore import CallStatus
from ledger import MemorySink
from subagent import AlreadyResumedError, Defaults, SqliteCheckpoints, TaskPaused, open_pool
from tests.serve._two_waiting import both_deferred, register

from .test_recover_paused import asks


async def test_an_answer_is_stored_and_a_resumed_state_refuses_more(tmp_path: Path) -> None:
    path, audit = tmp_path / "c.db", MemorySink()
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(attrs.evolve(asks(), audit=audit))
        with pytest.raises(TaskPaused) as paused:
            await (await pool.submit("asks", "go")).wait()
        state = paused.value.state
        text = state.to_json()
        with pytest.raises(agentcore.RunStateError):
            await pool.answer(state, "c9", allow=True)
        assert state.to_json() == text
        await pool.answer(state, "c1", allow=False, reason="no", by="dan")
        assert state.pending[0].status is CallStatus.denied
    answered = [(e.path, e.call_id, e.tool, e.verdict, e.reason, dict(e.data))
                for e in audit.entries if e.kind == "answered"]
    assert answered == [(("asks/0001",), "c1", "write", "deny", "no", {"by": "dan"})]
    # A new process: the tree is listed with the denial, no call waits.
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(asks())
        [tree] = (await pool.recover()).paused
        assert tree.state.pending_approvals == ()
        assert (tree.state.pending[0].status, tree.state.pending[0].by) == (
            CallStatus.denied, "dan")
        await (await pool.resume(tree.state, name="asks")).wait()
        [before] = await store.rows()
        with pytest.raises(agentcore.RunStateError):  # the resumed run's own, ended
            await pool.answer(tree.state, "c1", allow=True, by="eve")
        with pytest.raises(AlreadyResumedError):  # a copy of it, paused
            await pool.answer(state, "c1", allow=True, by="eve")
        assert state.pending[0].status is CallStatus.denied
        [after] = await store.rows()
        assert (after.status, after.checkpoint) == (before.status, before.checkpoint)


async def test_two_answers_at_once_are_both_stored(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    defaults = Defaults(gate=both_deferred(2))
    async with (SqliteCheckpoints(path) as store,
                open_pool(checkpoints=store, defaults=defaults) as pool):
        register(pool, tmp_path)
        with pytest.raises(TaskPaused) as paused:
            await (await pool.submit("lead", "go")).wait()
        state = paused.value.state
        assert sorted(a.call_id for a in state.pending_approvals) == ["c1", "c2"]
        async with trio.open_nursery() as nursery:
            for call_id in ("c1", "c2"):
                nursery.start_soon(partial(pool.answer, state, call_id, allow=True))
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        register(pool, tmp_path)
        [tree] = (await pool.recover()).paused
        assert tree.state.pending_approvals == ()
