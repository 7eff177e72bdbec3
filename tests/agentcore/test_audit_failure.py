"""A failing audit sink fails closed (SPEC 2.2, issue 9): an action whose entry cannot be
recorded does not happen, and the run ends ``error`` naming the ledger failure."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from agentcore import Agent, AuditError, EndReason, Event, EventKind
from agentcore.testing import Blocked, RecordingTool, ScriptedModel, tool_call_reply
from tests._failing_sink import DISK_FULL, FailingSink
from tests.agentcore._support import Recorder


async def run_with(kind: str) -> tuple[Any, RecordingTool, FailingSink, list[Event]]:
    tool = RecordingTool("echo")
    sink = FailingSink(kind)
    emit = Recorder()
    events = emit.events

    model = ScriptedModel([tool_call_reply("echo", id="c1"), "done"])
    agent = Agent(model=model, tools=[tool], audit=sink)
    return await agent.run("go", emit=emit), tool, sink, events


#: Each entry of a run with one tool call that the sink fails on: whether the tool
#: ran, and the entries recorded (the run ends with its run_end entry).
FAILURES = [
    ("prompt", False, ["run_end"]),
    ("model_response", False, ["prompt", "run_end"]),
    ("tool_request", False, ["prompt", "model_response", "run_end"]),
    ("gate_decision", False, ["prompt", "model_response", "tool_request", "run_end"]),
    ("tool_result", True,
     ["prompt", "model_response", "tool_request", "gate_decision", "run_end"]),
]


@pytest.mark.parametrize(("kind", "tool_ran", "recorded"), FAILURES)
async def test_an_entry_that_cannot_be_recorded_ends_the_run_error(
    kind: str, tool_ran: bool, recorded: list[str]
) -> None:
    result, tool, sink, events = await run_with(kind)
    text = f"AuditError: the audit sink failed to record {kind!r}: {DISK_FULL}"
    assert result.summary.end_reason is EndReason.error
    assert result.summary.error == text
    assert isinstance(result.exception, AuditError)
    assert isinstance(result.exception.__cause__, OSError)
    assert bool(tool.calls) is tool_ran
    assert sink.kinds == recorded
    assert [str(e.kind) for e in events[-2:]] == ["error", "agent_end"]
    assert events[-2].text == text


async def test_run_end_audit_failure_ends_the_run_error_instead_of_escaping() -> None:
    # The bug: a sink failing on run_end raised out of Run.run() (in a pool: the
    # task resolved as cancelled and the exception crashed the pool's nursery).
    result, tool, _, events = await run_with("run_end")
    assert tool.calls == ["{}"]
    assert result.output == "done"
    assert result.summary.end_reason is EndReason.error
    assert result.summary.error == (
        f"AuditError: the audit sink failed to record 'run_end': {DISK_FULL}"
    )
    assert isinstance(result.exception, AuditError)
    end = events[-1]
    assert end.kind is EventKind.agent_end
    assert end.summary == result.summary


async def test_abort_audit_failure_still_aborts(autojump_clock: trio.testing.MockClock) -> None:
    sink = FailingSink("abort")
    emit = Recorder()
    events = emit.events

    agent = Agent(model=ScriptedModel([Blocked("late")]), audit=sink)
    with trio.move_on_after(3) as scope:
        await agent.run("go", emit=emit)
    assert scope.cancelled_caught
    assert sink.kinds == ["prompt", "run_end"]
    assert [(str(e.kind), e.text) for e in events[-2:]] == [
        ("error", f"AuditError: the audit sink failed to record 'abort': {DISK_FULL}"),
        ("agent_end", ""),
    ]
    assert events[-1].summary is not None
    assert events[-1].summary.end_reason is EndReason.aborted


async def test_hung_run_end_audit_does_not_hold_back_agent_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The bug: run_end was audited inside the same bounded scope as agent_end, so a
    # sink that hung on it used up the bound and agent_end was never delivered.
    emit = Recorder()
    events = emit.events

    agent = Agent(model=ScriptedModel(["done"]), audit=FailingSink("run_end", hang=True))
    result = await agent.run("go", emit=emit)
    assert trio.current_time() == 5.0
    assert result.summary.end_reason is EndReason.error
    text = "AuditError: the audit sink did not record 'run_end' within 5s"
    assert result.summary.error == text
    assert [(str(e.kind), e.text) for e in events[-2:]] == [("error", text), ("agent_end", "")]
