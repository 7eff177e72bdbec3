"""A ``running`` checkpoint row holds a snapshot (``agentcore._run._checkpoint.snapshot``):
calls without a result, all ``waiting``, and no nested run. A row whose state was
edited and digested again to hold an answered call (``approved``: it would run on
recovery without its gate) or a nested run is refused; the answered state of a
claimed resume (``SqliteCheckpoints.claim``) is still recovered
(``test_recover_paused.py``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore import (
    BackgroundChild,
    CallStatus,
    Checkpoint,
    CheckpointKind,
    Message,
    PendingCall,
    RunState,
    ToolCall,
)
from agentcore._run._checkpoint import snapshot
from agentcore.testing import RecordingTool, ScriptedModel
from subagent import CheckpointError, CheckpointRow, Spec, SqliteCheckpoints, open_pool
from subagent._durable._claims import resume_key
from subagent._durable._recovery import _check_row, recover

CALL = ToolCall("c1", "write", "{}")


def _turn(pending: list[PendingCall], children: Sequence[RunState] = ()) -> Checkpoint:
    messages = [Message("user", "go"), Message("assistant", "", tool_calls=(CALL,))]
    state = snapshot(RunState.begin(messages, run_id="w/0001", agent="w", path=("w/0001",)))
    state.pending = pending
    state.children = list(children)
    return Checkpoint(CheckpointKind.turn, state)


async def _recover(path: Path, point: Checkpoint) -> tuple[str, list[str]]:
    async with SqliteCheckpoints(path) as store:
        await store.write("w", None, None, point)
    return await _refused(path)


async def _refused(path: Path) -> tuple[str, list[str]]:
    # Recover the one root of ``path``: it is refused (listed in ``failed``, typed).
    tool = RecordingTool("write")
    async with SqliteCheckpoints(path) as store, open_pool() as pool:
        pool.register(Spec("w", model=ScriptedModel(lambda request: "done"), tools=[tool]))
        recovered = await recover(pool, store)
    assert (list(recovered), recovered.paused) == ([], ())
    [(run_id, error)] = recovered.failed
    assert (run_id, type(error)) == ("w/0001", CheckpointError)
    return str(error), list(tool.calls)


@pytest.mark.parametrize("status", [CallStatus.approved, CallStatus.denied,
                                    CallStatus.deferred])
async def test_an_answered_call_in_a_running_row_is_refused(
    tmp_path: Path, status: CallStatus
) -> None:
    pending = PendingCall(CALL, status, "ok", "mallory")
    message, ran = await _recover(tmp_path / "c.db", _turn([pending]))
    assert message == (
        f"checkpoint of run 'w/0001' holds call 'c1' as {status.value}, which a running "
        "checkpoint never does (edited or damaged); refusing to recover it"
    )
    assert ran == []


async def test_a_delegated_call_in_a_running_row_is_refused(tmp_path: Path) -> None:
    child = RunState.begin([Message("user", "x")], run_id="w/0001/k/0002", agent="k")
    pending = PendingCall(CALL, CallStatus.delegated, "recovered")
    message, ran = await _recover(tmp_path / "c.db", _turn([pending], [child]))
    assert message == (
        "checkpoint of run 'w/0001' holds call 'c1' as delegated, which a running "
        "checkpoint never does (edited or damaged); refusing to recover it"
    )
    assert ran == []


async def test_a_nested_background_run_in_a_running_row_is_refused(tmp_path: Path) -> None:
    # It would be started again as a background child, beside its own row's.
    child = snapshot(RunState.begin([Message("user", "x")], run_id="w/0001/k/0002",
                                    agent="k", path=("w/0001", "k/0002"), input="x"))
    child.background = BackgroundChild("b0", "k")
    message, ran = await _recover(
        tmp_path / "c.db", _turn([PendingCall(CALL, CallStatus.waiting)], [child]))
    assert message == (
        "checkpoint of run 'w/0001' holds nested runs, which a running checkpoint never "
        "does (edited or damaged); refusing to recover it"
    )
    assert ran == []


async def test_a_claimed_row_with_a_call_in_flight_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    point = _turn([PendingCall(CALL, CallStatus.approved, "ok", "alice")])
    async with SqliteCheckpoints(path) as store:
        assert await store.claim("w", point.state, "k") is True
    # The in-flight ids are outside the digest; a claim stores none.
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE checkpoints SET in_flight = '[\"c1\"]'")
    assert await _refused(path) == (
        "checkpoint of run 'w/0001' holds answered calls and calls in flight (edited or "
        "damaged); refusing to recover it", []
    )


async def test_a_later_call_checkpoint_of_a_claimed_run_keeps_its_in_flight_check(
    tmp_path: Path
) -> None:
    # The claim's own row may hold calls that never started (nothing in flight); the
    # resumed run's later call checkpoint holds another state (the claim's marker is
    # still there): its call in flight erased (outside the digest), it is refused,
    # not run again.
    path = tmp_path / "c.db"
    paused = _turn([PendingCall(CALL, CallStatus.waiting)]).state
    second = ToolCall("c2", "write", "{}")
    later = snapshot(RunState.begin(
        [Message("user", "go"), Message("assistant", "", tool_calls=(CALL,)),
         Message("tool", "ok", tool_call_id="c1"),
         Message("assistant", "", tool_calls=(second,))],
        run_id="w/0001", agent="w", path=("w/0001",)))
    async with SqliteCheckpoints(path) as store:
        assert await store.claim("w", paused, resume_key(paused)) is True
        [row] = await store.rows()
        assert (row.claimed, row.claimed_state, row.in_flight) == (True, True, ())
        await store.write("w", None, None, Checkpoint(CheckpointKind.call, later, ("c2",)))
        [row] = await store.rows()
        assert (row.claimed, row.claimed_state, row.in_flight) == (True, False, ("c2",))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE checkpoints SET in_flight = '[]'")
    assert await _refused(path) == (
        "checkpoint of run 'w/0001' does not match its state: call 'c2' has no result "
        "and is not among its in-flight calls (edited or damaged); refusing to recover it",
        []
    )


async def test_a_claimed_answered_row_is_recovered(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    point = _turn([PendingCall(CALL, CallStatus.approved, "ok", "alice")])
    async with SqliteCheckpoints(path) as store:
        assert await store.claim("w", point.state, "k") is True
        [row] = await store.rows()
        assert (row.status, row.claimed) == ("running", True)
    tool = RecordingTool("write")
    async with SqliteCheckpoints(path) as store, open_pool() as pool:
        pool.register(Spec("w", model=ScriptedModel(lambda request: "done"), tools=[tool]))
        [task] = await recover(pool, store)
        assert (await task.wait()).output == "done"
    assert tool.calls == ["{}"]


@given(
    statuses=st.lists(st.sampled_from(list(CallStatus)), min_size=1, max_size=4),
    claimed=st.booleans(),
    root=st.booleans(),
)
def test_only_a_claimed_root_row_may_hold_answered_calls(
    statuses: list[CallStatus], claimed: bool, root: bool
) -> None:
    # Property of the row check alone (no file): a running row not claimed as a root's
    # resume is refused at its first call that is not waiting, naming it.
    spec = Spec("w", model=ScriptedModel(lambda request: "done"))
    calls = [ToolCall(f"c{k}", "write", "{}") for k in range(len(statuses))]
    messages = [Message("user", "go"), Message("assistant", "", tool_calls=calls)]
    state = snapshot(RunState.begin(messages, run_id="w/0001", agent=spec.agent_id,
                                    path=("w/0001",)))
    state.pending = [PendingCall(c, s) for c, s in zip(calls, statuses, strict=True)]
    row = CheckpointRow("w/0001", "w", None if root else "p/0001", None if root else "d1",
                        "running", 1, (calls[0].id,), state, claimed)
    answered = [(c.id, s) for c, s in zip(calls, statuses, strict=True)
                if s is not CallStatus.waiting]
    if answered and not (claimed and root):
        with pytest.raises(CheckpointError) as info:
            _check_row(row, state, spec)
        call_id, status = answered[0]
        assert str(info.value) == (
            f"checkpoint of run 'w/0001' holds call {call_id!r} as {status.value}, which "
            "a running checkpoint never does (edited or damaged); refusing to recover it"
        )
    elif answered:
        # A claimed resume stores nothing in flight.
        with pytest.raises(CheckpointError, match="holds answered calls and calls in flight"):
            _check_row(row, state, spec)
    else:
        _check_row(row, state, spec)  # an honest call checkpoint: c0 in flight
