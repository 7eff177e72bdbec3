"""Attacks on composed gates: identity of a shared gate, answers of the wrong shape."""

from __future__ import annotations

import trio
import trio.testing

from agentcore import (
    Agent,
    AllOf,
    GateDecision,
    GateRequest,
    nested_gate,
)
from agentcore.testing import RecordingTool, ScriptedModel, tool_call_reply


class Policy:
    """A gate written as a method: each attribute access makes a new bound method."""

    def __init__(self) -> None:
        self.asked = 0

    async def check(self, request: GateRequest) -> GateDecision:
        self.asked += 1
        await trio.lowlevel.checkpoint()
        return GateDecision(False, "no")


def test_a_bound_method_gate_shared_by_a_tree_is_asked_once() -> None:
    policy = Policy()
    # Two specs built with ``gate=policy.check`` hold two distinct bound methods.
    parent_gate, child_gate = policy.check, policy.check
    assert parent_gate is not child_gate
    gate = nested_gate(parent_gate, "a/0001", child_gate)
    assert gate is child_gate


def test_distinct_objects_stay_distinct_gates() -> None:
    first, second = Policy(), Policy()
    gate = nested_gate(first.check, "a/0001", second.check)
    assert isinstance(gate, AllOf)
    assert [owner for owner, _ in gate.gates] == ["a/0001", ""]


async def test_a_decision_whose_allowed_is_not_a_bool_denies(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def sloppy(request: GateRequest) -> GateDecision:
        await trio.lowlevel.checkpoint()
        return GateDecision("no")  # type: ignore[arg-type]

    tool = RecordingTool("write")
    model = ScriptedModel([tool_call_reply("write", "{}", id="c1"), "done"])
    result = await Agent(model=model, tools=[tool], gate=sloppy).run("x")
    assert tool.calls == []
    assert result.messages[2].content == (
        "denied: the gate answered a GateDecision whose allowed is str, not bool"
    )
