"""The stock gates (SPEC 1.3) and their composition (issue 13 item 5)."""

from __future__ import annotations

import trio
import trio.testing

from agentcore import (
    Agent,
    AllOf,
    ApprovalGate,
    GateDecision,
    GateRequest,
    ToolCall,
    ToolGate,
    allow_all,
    deny_all,
    nested_gate,
    read_only,
)
from agentcore.testing import RecordingTool, ScriptedModel, tool_call_reply

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


# -- composition: AllOf and nested_gate (issue 13 item 5) --------------------------------


def asking(log: list[str], name: str, gate: ToolGate) -> ToolGate:
    async def ask(req: GateRequest) -> GateDecision:
        log.append(name)
        return await gate(req)

    return ask


async def test_all_of_asks_in_order_and_the_first_denial_decides() -> None:
    log: list[str] = []
    gate = AllOf([
        ("top/0001", asking(log, "top", allow_all)),
        ("top/0001/mid/0002", asking(log, "mid", read_only)),
        ("", asking(log, "own", allow_all)),
    ])
    assert await gate(request(RecordingTool("write"))) == GateDecision(
        False,
        "the gate of top/0001/mid/0002: tool 'write' may change things and only read-only "
        "tools are allowed",
    )
    assert log == ["top", "mid"]
    log.clear()
    assert await gate(request(RecordingTool("look", read_only=True))) == GateDecision(
        True, "allowed"
    )
    assert log == ["top", "mid", "own"]


async def test_all_of_passes_its_own_gates_reasons_unchanged() -> None:
    gate = AllOf([("top/0001", allow_all), ("", deny_all)])
    assert await gate(request(RecordingTool("w"))) == GateDecision(
        False, "tool 'w' is not allowed: every tool is denied"
    )
    assert await AllOf([])(request(RecordingTool("w"))) == GateDecision(True, "allowed")


async def test_a_member_that_raises_or_answers_wrongly_denies() -> None:
    async def broken(req: GateRequest) -> GateDecision:
        raise RuntimeError("policy store down")

    async def sloppy(req: GateRequest) -> bool:
        return True

    gate = AllOf([("top/0001", broken), ("", allow_all)])
    assert await gate(request(RecordingTool("w"))) == GateDecision(
        False, "the gate of top/0001 failed: RuntimeError: policy store down"
    )
    gate = AllOf([("", sloppy)])  # type: ignore[list-item]
    assert await gate(request(RecordingTool("w"))) == GateDecision(
        False, "the gate answered bool, not a GateDecision"
    )


async def test_a_member_that_hangs_denies_at_the_agents_gate_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def hang(req: GateRequest) -> GateDecision:
        await trio.sleep_forever()
        raise AssertionError

    tool = RecordingTool("w")
    model = ScriptedModel([tool_call_reply("w", id="c1"), "done"])
    gate = AllOf([("top/0001", allow_all), ("top/0001/mid/0002", hang), ("", allow_all)])
    result = await Agent(model=model, tools=[tool], gate=gate, gate_timeout=7).run("x")
    assert tool.calls == []
    assert result.summary.duration == 7.0
    assert result.messages[2].content == (
        "denied: the gate of top/0001/mid/0002 did not decide within 7s"
    )


async def test_a_plain_gate_that_answers_wrongly_denies(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def sloppy(req: GateRequest) -> None:
        await trio.lowlevel.checkpoint()

    tool = RecordingTool("w")
    model = ScriptedModel([tool_call_reply("w", id="c1"), "done"])
    result = await Agent(model=model, tools=[tool], gate=sloppy).run("x")  # type: ignore[arg-type]
    assert tool.calls == []
    assert result.messages[2].content == "denied: the gate answered NoneType, not a GateDecision"


def test_nested_gate_names_the_outer_gates_and_keeps_its_own_last() -> None:
    assert nested_gate(None, "top/0001", read_only) is read_only
    assert nested_gate(None, "top/0001", None) is None
    first = nested_gate(read_only, "top/0001", allow_all)
    assert isinstance(first, AllOf)
    assert first.gates == (("top/0001", read_only), ("", allow_all))
    second = nested_gate(first, "top/0001/mid/0002", deny_all)
    assert isinstance(second, AllOf)
    assert second.gates == (
        ("top/0001", read_only), ("top/0001/mid/0002", allow_all), ("", deny_all)
    )
    only_outer = nested_gate(read_only, "top/0001", None)
    assert isinstance(only_outer, AllOf)
    assert only_outer.gates == (("top/0001", read_only),)


def test_nested_gate_asks_a_shared_gate_once() -> None:
    async def yes(req: GateRequest) -> bool:
        return True

    shared = ApprovalGate(yes)
    gate = nested_gate(nested_gate(shared, "a/0001", shared), "a/0001/b/0002", shared)
    assert gate is shared  # asked once, as the run's own: its denials blame no ancestor
