"""The stock gates (SPEC 1.3)."""

from __future__ import annotations

import trio
import trio.testing

from agentcore import (
    ApprovalGate,
    GateDecision,
    GateRequest,
    ToolCall,
    allow_all,
    deny_all,
    read_only,
)
from agentcore.testing import RecordingTool

CALL = ToolCall("c1", "t", "{}")


def request(tool: RecordingTool) -> GateRequest:
    return GateRequest(("a/0001",), tool, ToolCall("c1", tool.name, "{}"))


async def test_allow_and_deny_all() -> None:
    tool = RecordingTool("writer")
    assert await allow_all(request(tool)) == GateDecision(True, "allowed")
    assert await deny_all(request(tool)) == GateDecision(
        False, "tool 'writer' is not allowed: every tool is denied"
    )


async def test_read_only_gate() -> None:
    assert await read_only(request(RecordingTool("look", read_only=True))) == GateDecision(
        True, "read-only tool"
    )
    assert await read_only(request(RecordingTool("write"))) == GateDecision(
        False, "tool 'write' may change things and only read-only tools are allowed"
    )


async def test_approval_gate_asks_the_approver() -> None:
    asked: list[GateRequest] = []

    async def approver(req: GateRequest) -> bool:
        asked.append(req)
        return req.tool.name == "ok"

    gate = ApprovalGate(approver)
    assert await gate(request(RecordingTool("ok"))) == GateDecision(True, "approved")
    assert await gate(request(RecordingTool("no"))) == GateDecision(
        False, "the approver refused tool 'no'"
    )
    assert [r.tool.name for r in asked] == ["ok", "no"]


async def test_approval_gate_times_out_to_deny(autojump_clock: trio.testing.MockClock) -> None:
    async def never(req: GateRequest) -> bool:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    start = trio.current_time()
    decision = await ApprovalGate(never)(request(RecordingTool("x")))
    assert decision == GateDecision(False, "no approval for tool 'x' within 60s")
    assert trio.current_time() - start == 60.0
    decision = await ApprovalGate(never, timeout=2.5)(request(RecordingTool("x")))
    assert decision == GateDecision(False, "no approval for tool 'x' within 2.5s")
