"""A budget's spend survives pause, approval and resume (issue 32 item 3): it is
stored in the paused state (``RunState.spent``) and in each checkpoint row, and the
budgets of a resumed or recovered task go on from it. Before, every approval reset
the meter: ``Budget(model_calls=3)`` allowed 9 model calls over 8 approvals."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import agentcore
from agentcore import (
    GateDecision,
    GateRequest,
    Message,
    ModelRequest,
    RunState,
    Spent,
    ToolCall,
    Usage,
)
from agentcore.testing import ScriptedModel
from subagent import Budget, BudgetExceeded, Spec, SqliteCheckpoints, TaskPaused, open_pool

CALL = Usage(10, 5)


def writes_forever() -> ScriptedModel:
    # Each answer asks for one more write (call ids w0, w1, ...).
    def reply(request: ModelRequest) -> Message:
        n = sum(1 for m in request.messages if m.role == "assistant")
        return Message("assistant", f"turn {n}",
                       tool_calls=[ToolCall(f"w{n}", "write", "{}")])

    return ScriptedModel(reply, usage=CALL)


async def _defer(request: GateRequest) -> GateDecision:
    await trio.lowlevel.checkpoint()
    return GateDecision.defer("ask a human")


async def _write(arguments: str) -> str:
    await trio.lowlevel.checkpoint()
    return "written"


def writer(model: ScriptedModel, budget: Budget | None = None) -> Spec:
    tool = agentcore.FunctionTool("write", "write", {"type": "object"}, _write)
    return Spec("writer", model=model, tools=[tool], gate=_defer, budget=budget)


def _approved(state: RunState) -> RunState:
    # The state as a new process reads it back (JSON), every deferred call approved.
    again = RunState.from_json(state.to_json())
    for pending in again.pending_approvals:
        again.approve(pending.call_id, by="alice")
    return again


async def test_approvals_through_pool_resume_do_not_reset_a_spec_budget() -> None:
    model = writes_forever()
    budget = Budget(model_calls=3)
    async with open_pool() as pool:
        pool.register(writer(model, budget))
        task = await pool.submit("writer", "go")
        approvals = 0
        with pytest.raises(BudgetExceeded) as info:
            for _ in range(8):
                try:
                    await task.wait()
                except TaskPaused as paused:
                    assert paused.state.spent == {"task": Spent(
                        10 * (approvals + 1), 5 * (approvals + 1), None, approvals + 1, 1)}
                    approvals += 1
                    task = await pool.resume(_approved(paused.state))
    assert str(info.value) == (
        "task writer/0001 spent its budget: model_calls 3 of 3, reached by a model call "
        "of writer/0001")
    assert (approvals, len(model.requests)) == (2, 3)


async def test_approvals_in_new_pools_do_not_reset_the_pool_budget() -> None:
    # As ``subagent resume`` does: each resume in a new pool (a new process).
    model = writes_forever()
    text = ""
    approvals = 0
    for _ in range(8):
        async with open_pool(budget=Budget(model_calls=3)) as pool:
            pool.register(writer(model))
            task = await (pool.resume(_approved(RunState.from_json(text))) if text
                          else pool.submit("writer", "go"))
            try:
                await task.wait()
            except TaskPaused as paused:
                text = paused.state.to_json()
                approvals += 1
                continue
            except BudgetExceeded as exc:
                assert str(exc) == (
                    "task writer/0001 stopped: the pool spent its budget: model_calls 3 of "
                    "3, reached by a model call of writer/0001")
                break
    assert (approvals, len(model.requests)) == (2, 3)


async def test_recover_goes_on_from_the_spend_of_the_last_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    model = writes_forever()
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(writer(model, Budget(model_calls=2)))
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("writer", "go")).wait()
    assert info.value.state.spent == {"task": Spent(10, 5, None, 1, 1)}
    async with SqliteCheckpoints(path) as store, open_pool(checkpoints=store) as pool:
        pool.register(writer(model, Budget(model_calls=2)))
        [tree] = (await pool.recover()).paused
        assert tree.state.spent == {"task": Spent(10, 5, None, 1, 1)}
        tree.state.approve("w0")
        with pytest.raises(BudgetExceeded) as exceeded:
            await (await pool.resume(tree.state, name=tree.name)).wait()
    assert str(exceeded.value) == (
        "task writer/0001 spent its budget: model_calls 2 of 2, reached by a model call "
        "of writer/0001")
    assert len(model.requests) == 2


async def test_a_state_whose_spend_reached_the_limit_is_refused() -> None:
    model = writes_forever()
    async with open_pool() as pool:
        pool.register(writer(model, Budget(model_calls=5)))
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("writer", "go")).wait()
        state = _approved(info.value.state)
        state.spent = {"task": Spent(model_calls=5, tasks=1)}
        with pytest.raises(BudgetExceeded) as refused:
            await pool.resume(state)
    assert str(refused.value) == (
        "task writer/0001 spent its budget: model_calls 5 of 5, reached by a model call "
        "of writer/0001")
    assert len(model.requests) == 1


def test_a_state_without_spend_reads_as_nothing_spent() -> None:
    state = RunState.begin([Message("user", "go")], run_id="w/0001", agent="w",
                           path=("w/0001",), input="go")
    text = state.to_json()
    assert '"version":1' in text and "spent" not in text
    assert RunState.from_json(text).spent == {}


@settings(max_examples=25, deadline=None)
@given(limit=st.integers(1, 5), approvals=st.integers(0, 8), fresh=st.lists(st.booleans(),
                                                                            max_size=8))
def test_model_calls_never_exceed_the_budget(limit: int, approvals: int,
                                             fresh: list[bool]) -> None:
    # Any sequence of approvals, each resumed in the same pool or a new one (a new
    # process), never gets past ``limit`` model calls: the spec's budget and the pool's.
    model = writes_forever()

    async def main() -> None:
        state: RunState | None = None
        pool_cm = None
        for k in range(approvals + 1):
            new = k == 0 or (fresh[k - 1] if k - 1 < len(fresh) else False)
            if new and pool_cm is not None:
                await pool_cm.__aexit__(None, None, None)
                pool_cm = None
            if pool_cm is None:
                pool_cm = open_pool(budget=Budget(model_calls=limit + 1))
                pool = await pool_cm.__aenter__()
                pool.register(writer(model, Budget(model_calls=limit)))
            task = await (pool.resume(_approved(state)) if state is not None
                          else pool.submit("writer", "go"))
            try:
                await task.wait()
            except TaskPaused as paused:
                state = paused.state
            except BudgetExceeded:
                break
        if pool_cm is not None:
            await pool_cm.__aexit__(None, None, None)
        assert len(model.requests) <= limit

    trio.run(main)


def _with_body(text: str, old: str, new: str) -> str:
    # ``text`` with its state body edited and its digest made to match (as a writer
    # that rewrites the digest can): what the decoder alone must refuse.
    import hashlib
    import json

    envelope = json.loads(text)
    body = text[text.index('"state":') + len('"state":'):-1].replace(old, new)
    envelope["digest"] = "sha256:" + hashlib.sha256(body.encode()).hexdigest()
    return (f'{{"format":"{envelope["format"]}","version":{envelope["version"]},'
            f'"digest":"{envelope["digest"]}","state":{body}}}')


@pytest.mark.parametrize(("old", "new", "reason"), [
    ('"model_calls":3', '"model_calls":-3', "Expected `int` >= 0 - at `$.spent[...].model_calls`"),
    ('"tasks":1}', '"tasks":1,"extra":1}', "Object contains unknown field `extra` - at "
     "`$.spent[...]`"),
    ('"cost":null', '"cost":1e300',
     "Expected `float` <= 1000000000000000.0 - at `$.spent[...].cost`"),
])
def test_a_stored_spend_is_checked_as_outside_input(old: str, new: str, reason: str) -> None:
    state = RunState.begin([Message("user", "go")], run_id="w/0001", agent="w",
                           path=("w/0001",), input="go")
    state.spent = {"task": Spent(1, 2, None, 3, 1)}
    text = state.to_json()
    assert RunState.from_json(text).spent == state.spent
    with pytest.raises(agentcore.RunStateError) as info:
        RunState.from_json(_with_body(text, old, new))
    assert str(info.value) == f"not a RunState: bad state: {reason}"


def test_a_version_1_state_with_spend_is_refused() -> None:
    state = RunState.begin([Message("user", "go")], run_id="w/0001", agent="w",
                           path=("w/0001",), input="go")
    state.spent = {"task": Spent(model_calls=1)}
    text = _with_body(state.to_json().replace('"version":2', '"version":1'), "", "")
    with pytest.raises(agentcore.RunStateError) as info:
        RunState.from_json(text)
    assert str(info.value) == "not a RunState: bad state: a version 1 state has no spend nor nonce"
