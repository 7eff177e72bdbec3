"""``agentcore.lowlevel.current_tool_call().idempotency_key``: stable for a call across pause and
resume (the state's JSON) and crash recovery (the checkpoint rows), different between
calls and between runs, even two runs of the same run id (issue 32, idempotency keys)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

import agentcore
from agentcore import (
    Checkpoint,
    CheckpointKind,
    GateDecision,
    GateRequest,
    Message,
    ModelRequest,
    RunState,
    ToolCall,
)
from agentcore._run._idempotency import idempotency_key
from agentcore.testing import ScriptedModel
from subagent import Spec, SqliteCheckpoints, TaskPaused, open_pool


def _model(turns: list[list[str]]) -> ScriptedModel:
    # Turn n calls the tools named in turns[n] (call ids "<tool>-<n>"), then "done".
    def reply(request: ModelRequest) -> Message:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n == len(turns):
            return Message("assistant", "done")
        return Message("assistant", "", tool_calls=[
            ToolCall(f"{name}-{n}", name, json.dumps({"n": n})) for name in turns[n]])

    return ScriptedModel(reply)


def _recording(name: str, keys: list[tuple[str, str]], *, idempotent: bool = False,
               read_only: bool = False, hold: trio.Event | None = None) -> agentcore.Tool:
    async def run(arguments: str) -> str:
        call = agentcore.lowlevel.current_tool_call()
        assert call is not None
        keys.append((call.id, call.idempotency_key))
        if hold is not None and not hold.is_set():
            hold.set()
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()
        return f"{name} ok"

    return agentcore.FunctionTool(name, name, {"type": "object"}, run,
                                  read_only=read_only, idempotent=idempotent)


async def _defer_pay(request: GateRequest) -> GateDecision:
    await trio.lowlevel.checkpoint()
    if request.call.name == "pay":
        return GateDecision.defer("ask a human")
    return GateDecision(True, "allowed")


async def test_the_key_survives_pause_and_resume() -> None:
    keys: list[tuple[str, str]] = []

    def spec() -> Spec:
        return Spec("shop", model=_model([["look", "pay"]]), gate=_defer_pay,
                    tools=[_recording("look", keys, read_only=True), _recording("pay", keys)])

    async with open_pool() as pool:
        pool.register(spec())
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("shop", "buy")).wait()
    paused = info.value.state
    assert len(paused.nonce) == 32
    text = paused.to_json()
    stored = RunState.from_json(text)
    assert stored.nonce == paused.nonce
    stored.approve("pay-0")
    async with open_pool() as pool:  # a new pool, as a new process
        pool.register(spec())
        await (await pool.resume(stored)).wait()
    look, pay = keys
    assert look == ("look-0", idempotency_key(paused.nonce, "shop/0001", "look-0"))
    assert pay == ("pay-0", idempotency_key(paused.nonce, "shop/0001", "pay-0"))
    assert look[1] != pay[1]
    assert len(pay[1]) == 64 and int(pay[1], 16) >= 0


async def test_the_key_of_a_call_in_flight_at_a_crash_is_the_same_on_recovery(
    tmp_path: Path,
) -> None:
    keys: list[tuple[str, str]] = []
    hold = trio.Event()

    def spec() -> Spec:
        return Spec("shop", model=_model([["pay"]]),
                    tools=[_recording("pay", keys, idempotent=True, hold=hold)])

    # The run is stopped while "pay" runs; what its file holds then (the row of the
    # checkpoint before the call) is what a crash leaves: copied to a second file.
    crashed = tmp_path / "crashed.db"
    async with SqliteCheckpoints(tmp_path / "c.db") as store, open_pool(
            checkpoints=store) as pool:
        pool.register(spec())
        task = await pool.submit("shop", "buy")
        await hold.wait()
        [row] = await store.rows()
        assert (row.status, row.in_flight) == ("running", ("pay-0",))
        assert row.state is not None
        async with SqliteCheckpoints(crashed) as copy:
            await copy.write(row.name, None, None,
                             Checkpoint(CheckpointKind.call, row.state, row.in_flight))
        task.cancel()
    async with SqliteCheckpoints(crashed) as store, open_pool(checkpoints=store) as pool:
        pool.register(spec())
        [again] = await pool.recover()
        assert (await again.wait()).output == "done"
    first, second = keys
    assert first == second
    assert first[1] == idempotency_key(row.state.nonce, "shop/0001", "pay-0")


async def test_two_runs_of_the_same_run_id_have_different_keys() -> None:
    keys: list[tuple[str, str]] = []
    for _ in range(2):  # two pools: both runs are shop/0001, both calls pay-0
        async with open_pool() as pool:
            pool.register(Spec("shop", model=_model([["pay"]]),
                               tools=[_recording("pay", keys)]))
            await (await pool.submit("shop", "buy")).wait()
    (id1, key1), (id2, key2) = keys
    assert id1 == id2 == "pay-0"
    assert key1 != key2


def test_an_old_state_without_a_nonce_derives_keys_from_ids_alone() -> None:
    assert idempotency_key("", "shop/0001", "pay-0") == idempotency_key(
        "", "shop/0001", "pay-0")
    assert idempotency_key("", "shop/0001", "pay-0") != idempotency_key(
        "", "shop/0001", "pay-1")
    # Lengths are part of what is hashed: ids cannot run into each other.
    assert idempotency_key("", "a", "bc") != idempotency_key("", "ab", "c")
