"""Pausing a run for a human and resuming it (issue 20 item 2), at agentcore level."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from agentcore import (
    Agent,
    AllOf,
    ApprovalGate,
    CallPaused,
    CallStatus,
    EndReason,
    EventKind,
    FunctionTool,
    GateDecision,
    GateRequest,
    Message,
    PendingApproval,
    PendingCall,
    ResumeError,
    RunState,
    RunSummary,
    ToolCall,
    current_run,
    deny_all,
)
from agentcore._tools._gate import ask
from agentcore.lowlevel import resumed_call_state
from agentcore.testing import RecordingTool, ScriptedModel
from ledger import MemorySink

from ._durable import agent, gate, model
from ._support import Recorder


def calls(*spec: tuple[str, str, int]) -> list[list[object]]:
    return [list(c) for c in spec]


async def test_a_deferred_call_in_a_batch_lets_the_started_calls_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Three read-only calls, two at a time: the second defers; the first finishes
    # (at t=2), the third never starts.
    workload = [calls(("c1", "look", 2), ("c2", "look", 1), ("c3", "look", 1))]
    worker = agent(workload, gate("c2", None))
    worker.max_parallel_tools = 2
    events = Recorder()
    result = await worker.run("go", run_id="r1", emit=events)
    assert trio.current_time() == 2.0
    assert result.summary.end_reason is EndReason.paused
    assert (result.output, result.summary.turns, result.summary.tool_calls) == ("", 1, 2)
    assert result.summary.duration == 2.0
    state = result.state
    assert state is not None and state.paused
    assert state.pending == [
        PendingCall(ToolCall("c1", "look", '{"s": 2}'), CallStatus.done,
                    result='look {"s": 2}'),
        PendingCall(ToolCall("c2", "look", '{"s": 1}'), CallStatus.deferred, "ask a human"),
        PendingCall(ToolCall("c3", "look", '{"s": 1}'), CallStatus.waiting),
    ]
    assert state.pending_approvals == (
        PendingApproval((), "c2", "look", '{"s": 1}', "ask a human"),
    )
    # No result message yet for any call of the paused turn.
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert events.of(EventKind.gate_decision)[-1].decision == GateDecision.defer("ask a human")
    assert events.kinds[-1] == "agent_end"

    state.approve("c2")
    resumed = Recorder()
    again = await worker.resume(state, emit=resumed)
    assert again.summary.end_reason is EndReason.stop
    assert again.output == "done after 1 turns"
    assert [(m.tool_call_id, m.content) for m in again.messages if m.role == "tool"] == [
        ("c1", 'look {"s": 2}'), ("c2", 'look {"s": 1}'), ("c3", 'look {"s": 1}'),
    ]
    assert (again.summary.turns, again.summary.tool_calls, again.summary.duration) == (2, 3, 4.0)
    assert resumed.kinds == [
        "agent_start", "gate_decision", "tool_end", "tool_start", "gate_decision",
        "tool_end", "turn_start", "model_request", "model_response", "agent_end",
    ]
    assert again.state is None


async def test_a_denied_call_gets_an_error_result(autojump_clock: trio.testing.MockClock) -> None:
    worker = agent([calls(("c1", "write", 1))], gate("c1", None))
    result = await worker.run("go")
    assert result.state is not None
    result.state.deny("c1", "not on a Friday", by="bob")
    again = await worker.resume(result.state)
    assert again.messages[2] == Message(
        "tool", "denied: not on a Friday", tool_call_id="c1", is_error=True
    )
    assert (again.summary.denied, again.summary.tool_errors) == (1, 0)
    assert trio.current_time() == 0.0


async def test_approval_gate_defers_after_its_time(autojump_clock: trio.testing.MockClock) -> None:
    async def never(request: GateRequest) -> bool:
        await trio.sleep_forever()
        raise AssertionError

    worker = agent([calls(("c1", "write", 0))], ApprovalGate(never, defer_after=30))
    result = await worker.run("go")
    assert trio.current_time() == 30.0
    assert result.state is not None
    assert result.state.pending_approvals == (PendingApproval(
        (), "c1", "write", '{"s": 0}',
        "no answer for tool 'write' within 30s: left for approval",
    ),)


async def test_approval_gate_without_defer_after_still_denies(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def never(request: GateRequest) -> bool:
        await trio.sleep_forever()
        raise AssertionError

    result = await agent([calls(("c1", "write", 0))], ApprovalGate(never, timeout=5)).run("go")
    assert result.summary.end_reason is EndReason.stop
    assert result.messages[2].content == "denied: no approval for tool 'write' within 5s"


async def test_a_deferral_by_an_ancestor_gate_keeps_its_owner() -> None:
    tool = RecordingTool("write")
    request = GateRequest(("a/0001", "b/0002"), tool, ToolCall("c1", "write"))

    async def defer(request: GateRequest) -> GateDecision:
        return GateDecision.defer("ask a human")

    both = AllOf([("a/0001", defer), ("", gate("", None))])
    assert await both(request) == GateDecision.defer("the gate of a/0001: ask a human")


@pytest.mark.parametrize("decision", [
    GateDecision(True, "x", deferred=True),
    GateDecision(False, "x", deferred="yes"),  # type: ignore[arg-type]
])
async def test_a_malformed_deferral_denies(decision: GateDecision) -> None:
    async def odd(request: GateRequest) -> GateDecision:
        return decision

    request = GateRequest((), RecordingTool("write"), ToolCall("c1", "write"))
    assert await ask(odd, request) == GateDecision(
        False, "the gate answered a GateDecision that is deferred but allowed, "
        "or whose deferred is not bool",
    )


async def test_a_resumed_run_can_pause_again(autojump_clock: trio.testing.MockClock) -> None:
    deferred = {"c1", "c3"}

    async def decide(request: GateRequest) -> GateDecision:
        await trio.lowlevel.checkpoint()
        if request.call.id in deferred:
            return GateDecision.defer(f"ask about {request.call.id}")
        return GateDecision(True, "allowed")

    worker = agent([calls(("c1", "write", 1), ("c2", "write", 1), ("c3", "write", 1))], decide)
    first = await worker.run("go")
    assert first.state is not None
    first.state.approve("c1")
    second = await worker.resume(RunState.from_json(first.state.to_json()))
    assert second.summary.end_reason is EndReason.paused
    assert second.state is not None
    assert [(p.call.id, p.status) for p in second.state.pending] == [
        ("c3", CallStatus.deferred)
    ]
    second.state.approve("c3")
    third = await worker.resume(RunState.from_json(second.state.to_json()))
    assert third.output == "done after 1 turns"
    assert [m.tool_call_id for m in third.messages if m.role == "tool"] == ["c1", "c2", "c3"]
    assert (third.summary.tool_calls, third.summary.duration) == (3, 3.0)


async def test_the_ledger_records_the_pause_the_answers_and_the_resume(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sink = MemorySink()
    worker = agent([calls(("c1", "write", 0))], gate("c1", None), sink)
    result = await worker.run("go", run_id="r1")
    assert result.state is not None
    result.state.approve("c1", reason="fine by me", by="alice")
    await worker.resume(result.state)
    rows = [(e.kind, e.call_id, e.verdict, e.reason, dict(e.data)) for e in sink.entries]
    assert rows == [
        ("prompt", None, None, None, {}),
        ("model_response", None, None, None, rows[1][4]),
        ("tool_request", "c1", None, None, {}),
        ("gate_decision", "c1", "defer", "ask a human", {}),
        ("run_end", None, None, None, rows[4][4]),
        ("approval", "c1", "allow", "fine by me", {"by": "alice"}),
        ("run_resumed", None, None, None, {"answers": 1, "pending": 1}),
        ("gate_decision", "c1", "allow", "fine by me", {}),
        ("tool_result", "c1", None, None, {}),
        ("model_response", None, None, None, rows[9][4]),
        ("run_end", None, None, None, rows[10][4]),
    ]
    assert rows[4][4]["end_reason"] == "paused"
    assert {e.run_id for e in sink.entries} == {"r1"}


async def test_resume_errors(autojump_clock: trio.testing.MockClock) -> None:
    worker = agent([calls(("c1", "write", 0))], gate("c1", None))
    result = await worker.run("go")
    state = result.state
    assert state is not None

    with pytest.raises(ResumeError) as info:
        await worker.resume(state)
    assert str(info.value) == "call 'c1' (tool 'write') has no answer yet: approve or deny it first"

    state.approve("c1")
    other = Agent(model=model([]), agent_id="other")
    with pytest.raises(ResumeError) as info:
        await other.resume(state)
    assert str(info.value) == (
        "this RunState is a run of agent 'worker', not of this Agent ('other')"
    )
    toolless = Agent(model=model([]), agent_id="worker")
    with pytest.raises(ResumeError) as info:
        await toolless.resume(state)
    assert str(info.value) == (
        "tool 'write' of approved call 'c1' is not among this Agent's tools (none)"
    )
    child = RunState.begin([], path=("w/0002",))
    child.pending = [PendingCall(ToolCall("k1", "write"), CallStatus.deferred, "ask")]
    state.children.append(child)
    with pytest.raises(ResumeError) as info:
        await worker.resume(state)  # a call deferred in a delegated run has no answer
    assert str(info.value) == "call 'k1' (tool 'write') has no answer yet: approve or deny it first"
    state.children.clear()

    await worker.resume(state)
    with pytest.raises(ResumeError) as info:
        await worker.resume(state)  # the resumed run owns it now; it ended
    assert str(info.value) == "this RunState is not paused (stop): only a paused run can be resumed"
    with pytest.raises(ResumeError) as info:
        await worker.resume(RunState.begin([Message("user", "x")]))
    assert str(info.value) == "this RunState is not paused (new): only a paused run can be resumed"


async def test_an_abort_while_pausing_is_an_abort(autojump_clock: trio.testing.MockClock) -> None:
    # The gate aborts the run as it defers: an abort wins, no state is kept.
    async def decide(request: GateRequest) -> GateDecision:
        run = current_run()
        assert run is not None
        run.abort("stop")
        return GateDecision.defer("ask")

    worker = Agent(
        model=ScriptedModel([Message("assistant", "", tool_calls=[ToolCall("c1", "w")])]),
        tools=[FunctionTool("w", "w", {}, _noop)], gate=decide,
    )
    result = await worker.run("go")
    assert result.summary.end_reason is EndReason.aborted
    assert (result.state, result.output, result.messages) == (None, "", (Message("user", "go"),))


async def _noop(arguments: str) -> str:
    return "ok"


async def test_a_tool_that_raises_call_paused_pauses_the_run() -> None:
    inner = RunState.begin([Message("user", "inner")], run_id="inner-1", path=("x",))
    inner.pending = [PendingCall(ToolCall("k1", "write"), CallStatus.deferred, "ask")]
    inner.summary = attrs.evolve(RunSummary(), end_reason=EndReason.paused)
    seen: list[RunState | None] = []

    async def starts_a_run(arguments: str) -> str:
        state = resumed_call_state()
        seen.append(state)
        if state is None:
            raise CallPaused("the inner run paused", inner)
        return f"continued {state.run_id}"

    worker = Agent(
        model=ScriptedModel(lambda r: "ok" if r.messages[-1].role == "tool" else Message(
            "assistant", "", tool_calls=[ToolCall("c1", "start")])),
        tools=[FunctionTool("start", "s", {}, starts_a_run, resumes_paused_calls=True)],
        agent_id="outer",
    )
    result = await worker.run("go")
    state = result.state
    assert state is not None
    assert state.pending == [PendingCall(ToolCall("c1", "start"), CallStatus.delegated,
                                         "the inner run paused")]
    assert state.children == [inner]
    assert state.pending_approvals == (PendingApproval(("x",), "k1", "write", "{}", "ask"),)
    state.approve("k1", path=("x",))
    again = await worker.resume(RunState.from_json(state.to_json()))
    assert again.messages[-2] == Message("tool", "continued inner-1", tool_call_id="c1")
    assert [s.run_id if s else None for s in seen] == [None, "inner-1"]
    assert resumed_call_state() is None


async def test_a_run_started_inside_a_continued_call_does_not_see_its_state() -> None:
    # The continued call starts another run (as the delegation tool starts a
    # subagent's): that run's own tool calls read no resumed state. Before, they read
    # the continued call's (the context variable is inherited), so a subagent
    # resumed this way tried to resume its own running state when it delegated again.
    inner = RunState.begin([Message("user", "inner")], run_id="inner-1", path=("x",))
    inner.pending = [PendingCall(ToolCall("k1", "write"), CallStatus.deferred, "ask")]
    inner.summary = attrs.evolve(RunSummary(), end_reason=EndReason.paused)
    seen: list[tuple[str, RunState | None]] = []

    async def look(arguments: str) -> str:
        seen.append(("look", resumed_call_state()))
        return "looked"

    nested = Agent(model=ScriptedModel([
        Message("assistant", "", tool_calls=[ToolCall("n1", "look")]), "nested done"]),
        tools=[FunctionTool("look", "l", {}, look, read_only=True)], agent_id="nested")

    async def starts_a_run(arguments: str) -> str:
        state = resumed_call_state()
        seen.append(("start", state))
        if state is None:
            raise CallPaused("the inner run paused", inner)
        return (await nested.run("go on")).output

    worker = Agent(
        model=ScriptedModel(lambda r: "ok" if r.messages[-1].role == "tool" else Message(
            "assistant", "", tool_calls=[ToolCall("c1", "start")])),
        tools=[FunctionTool("start", "s", {}, starts_a_run, resumes_paused_calls=True)],
        agent_id="outer",
    )
    state = (await worker.run("go")).state
    assert state is not None
    state.approve("k1", path=("x",))
    again = await worker.resume(state)
    assert again.messages[-2] == Message("tool", "nested done", tool_call_id="c1")
    assert [(k, s.run_id if s else None) for k, s in seen] == [
        ("start", None), ("start", "inner-1"), ("look", None)]


async def test_call_paused_without_a_state_is_a_failure() -> None:
    async def odd(arguments: str) -> str:
        raise CallPaused("no state", "not a state")

    worker = Agent(
        model=ScriptedModel([Message("assistant", "", tool_calls=[ToolCall("c1", "odd")]),
                             "done"]),
        tools=[FunctionTool("odd", "o", {}, odd)],
    )
    result = await worker.run("go")
    assert result.messages[2] == Message(
        "tool", "tool 'odd' failed: CallPaused: no state", tool_call_id="c1", is_error=True
    )


async def test_a_stored_delegated_call_cannot_run_another_tool_ungated() -> None:
    # Found by the attacker's review: a state file that marks a call of an ordinary
    # (mutating) tool "delegated" made resume run it with no gate and no approval entry.
    inner = RunState.begin([Message("user", "inner")], run_id="inner-1", path=("x",))
    inner.pending = [PendingCall(ToolCall("k1", "read"), CallStatus.approved, "ok")]
    inner.summary = attrs.evolve(RunSummary(), end_reason=EndReason.paused)
    ran: list[str] = []

    async def write(arguments: str) -> str:
        ran.append(arguments)
        return "written"

    worker = Agent(
        model=ScriptedModel(["done"]), tools=[FunctionTool("write", "w", {}, write)],
        agent_id="outer", gate=deny_all,
    )
    state = RunState.begin([Message("user", "go")], run_id="outer-1", agent="outer")
    state.pending = [PendingCall(ToolCall("c1", "write", '{"path": "x"}'), CallStatus.delegated)]
    state.children = [inner]
    state.summary = attrs.evolve(RunSummary(), end_reason=EndReason.paused)
    stored = RunState.from_json(state.to_json())
    with pytest.raises(ResumeError) as info:
        await worker.resume(stored)
    assert str(info.value) == (
        "call 'c1' is marked delegated, but its tool 'write' does not continue paused calls "
        "(resumes_paused_calls): refused"
    )
    assert ran == []
