"""The Agent's audit trail (SPEC 1.4, 2.1): every step recorded with the run's AgentPath."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

import ledger
from agentcore import Agent, GateDecision, GateRequest
from agentcore._errors import describe
from agentcore.testing import Blocked, RecordingTool, ScriptedModel, tool_call_reply

PATH = ("root/0001", "web/0002")


async def test_every_step_is_audited_with_the_path() -> None:
    sink = ledger.MemorySink()
    tool = RecordingTool("echo", "pong")

    async def gate(request: GateRequest) -> GateDecision:
        return GateDecision(request.call.id == "c1", "only the first")

    model = ScriptedModel(
        [tool_call_reply("echo", "{}", id="c1"), tool_call_reply("echo", "{}", id="c2"), "ok"]
    )
    agent = Agent(model=model, tools=[tool], gate=gate, audit=sink, agent_id="web")
    await agent.run("look it up", path=PATH, run_id="r1")
    entries = sink.entries
    assert [str(e.kind) for e in entries] == [
        "prompt",
        "model_response", "tool_request", "gate_decision", "tool_result",
        "model_response", "tool_request", "gate_decision", "tool_result",
        "model_response", "run_end",
    ]
    assert {e.path for e in entries} == {PATH}
    assert {(e.run_id, e.agent_id) for e in entries} == {("r1", "web")}
    assert [e.seq for e in entries] == list(range(1, 12))
    assert entries[0].arguments == "look it up"
    assert (entries[3].verdict, entries[3].reason) == ("allow", "only the first")
    assert (entries[4].result, entries[4].error) == ("pong", None)
    assert (entries[7].verdict, entries[7].reason) == ("deny", "only the first")
    assert entries[8].error == "denied: only the first"
    assert entries[10].data["end_reason"] == "stop"
    assert entries[10].data["turns"] == 3


async def test_abort_is_audited(autojump_clock: trio.testing.MockClock) -> None:
    sink = ledger.MemorySink()
    agent = Agent(model=ScriptedModel([Blocked("late")]), audit=sink)
    with trio.move_on_after(3):
        await agent.run("go", path=PATH)
    assert [str(e.kind) for e in sink.entries] == ["prompt", "abort", "run_end"]
    assert sink.entries[1].error == "Cancelled: cancelled due to deadline"
    assert sink.entries[2].data["end_reason"] == "aborted"
    assert sink.entries[2].duration == 3.0


async def test_secrets_are_redacted_in_arguments_results_and_errors(tmp_path: Path) -> None:
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    sink = ledger.JsonlSink(tmp_path / "audit.jsonl")
    tool = RecordingTool("fetch", f"token accepted: Bearer {key}")
    failing = RecordingTool("fail", RuntimeError(f"auth failed for api_key={key}"))
    model = ScriptedModel([
        tool_call_reply("fetch", f'{{"url": "x", "api_key": "{key}"}}', id="c1"),
        tool_call_reply("fail", "{}", id="c2"),
        "done",
    ])
    await Agent(model=model, tools=[tool, failing], audit=sink).run(f"use {key}", path=PATH)
    await sink.aclose()
    text = (tmp_path / "audit.jsonl").read_text()
    assert key not in text
    assert tool.calls == [f'{{"url": "x", "api_key": "{key}"}}']  # the tool still got it
    assert ledger.verify(tmp_path / "audit.jsonl").ok


async def test_a_cancel_is_described_without_the_cancelling_tasks_repr() -> None:
    # trio's own text names the task that cancelled by its repr (a memory address):
    # an audit entry keeps the cancel's source and reason only.
    with trio.CancelScope() as scope:
        scope.cancel(reason="enough")
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            assert " at 0x" in str(exc)
            assert describe(exc) == "Cancelled: cancelled due to explicit with reason 'enough'"
            raise
