"""An approved call is resumed only against the tool that was approved: a digest of
its tool's name and JSON schema is kept with the deferred call (issue 20 review)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from agentcore import Agent, FunctionTool, ResumeError, RunState, RunStateError
from agentcore._run._pending import schema_digest
from tests.agentcore._durable import gate, model
from tests.agentcore.test_runstate import body_of, envelope

Clock = trio.testing.MockClock
WORK = [[["c1", "write", 0]]]


def write_tool(schema: Mapping[str, Any]) -> FunctionTool:
    async def run(arguments: str) -> str:
        await trio.lowlevel.checkpoint()
        return "written"

    return FunctionTool("write", "write something", schema, run)


def agent(schema: Mapping[str, Any]) -> Agent:
    return Agent(model=model(WORK), tools=[write_tool(schema)], agent_id="worker",
                 gate=gate("c1", None))


SCHEMA: dict[str, object] = {"type": "object", "properties": {"s": {"type": "number"}}}


async def paused() -> RunState:
    result = await agent(SCHEMA).run("go")
    assert result.state is not None
    return result.state


async def test_the_deferred_call_keeps_its_tools_schema_digest(autojump_clock: Clock) -> None:
    state = await paused()
    [p] = state.pending
    assert p.schema == schema_digest("write", SCHEMA)
    assert p.schema == "sha256:" + hashlib.sha256(
        b'["write",{"properties":{"s":{"type":"number"}},"type":"object"}]').hexdigest()
    text = state.to_json()
    assert json.loads(text)["version"] == 2
    assert RunState.from_json(text).pending[0].schema == p.schema


async def test_an_approved_call_against_a_changed_tool_is_refused(autojump_clock: Clock) -> None:
    state = RunState.from_json((await paused()).to_json())
    state.approve("c1", by="alice")
    changed = {"type": "object", "properties": {"path": {"type": "string"}}}
    with pytest.raises(ResumeError) as info:
        await agent(changed).resume(state)
    assert str(info.value) == (
        "tool 'write' of approved call 'c1' is not the tool that was approved: its JSON "
        "schema changed since the pause (refused; ask for a new approval)"
    )
    # The same schema (keys in another order) resumes.
    same = {"properties": {"s": {"type": "number"}}, "type": "object"}
    result = await agent(same).resume(state)
    assert result.output == "done after 1 turns"


async def test_a_denied_call_or_a_state_without_digest_is_not_checked(
    autojump_clock: Clock,
) -> None:
    changed = {"type": "object"}
    denied = await paused()
    denied.deny("c1", "no")
    assert (await agent(changed).resume(denied)).summary.denied == 1
    older = await paused()
    older.pending[0] = attrs.evolve(older.pending[0], schema="")
    older.approve("c1")
    assert json.loads(older.to_json())["version"] == 1
    assert (await agent(changed).resume(older)).output == "done after 1 turns"


async def test_a_bad_digest_is_refused(autojump_clock: Clock) -> None:
    state = await paused()
    text = body_of(state).replace(state.pending[0].schema.encode(), b"sha256:xyz")
    with pytest.raises(RunStateError) as info:
        RunState.from_json(envelope(text, version=2))
    assert str(info.value) == (
        "not a RunState: bad state: a pending call's schema digest is not sha256: and "
        "64 hex digits"
    )
    with pytest.raises(RunStateError) as info:
        RunState.from_json(envelope(body_of(state), version=1))
    assert str(info.value) == "not a RunState: bad state: a version 1 state has no schema digests"
