"""Hooks (SPEC 4, issue 5.1): observers, interceptors, priority, timeouts, failures."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from agentcore import (
    Agent,
    EndReason,
    Event,
    EventKind,
    GateDecision,
    HookResult,
    Message,
    ModelRequest,
    ModelResponse,
    Run,
    ToolCall,
    ToolOutcome,
)
from agentcore.testing import RecordingTool, ScriptedModel, tool_call_reply
from ledger import MemorySink
from tests.agentcore._support import Recorder

Clock = trio.testing.MockClock


class Observer:
    def __init__(self, log: list[str], name: str, priority: int = 0) -> None:
        self.log = log
        self.name = name
        self.priority = priority

    async def on_event(self, event: Event) -> None:
        self.log.append(f"{self.name}:{event.kind}")


async def test_observers_see_every_event_after_the_destination_in_priority_order(
    autojump_clock: Clock,
) -> None:
    log: list[str] = []

    async def destination(event: Event) -> None:
        log.append(f"emit:{event.kind}")

    hooks = [Observer(log, "late", priority=10), Observer(log, "a"), Observer(log, "b")]
    await Agent(model=ScriptedModel(["hi"]), hooks=hooks).run("x", emit=destination)
    assert log[:4] == ["emit:agent_start", "a:agent_start", "b:agent_start", "late:agent_start"]
    assert [e for e in log if e.startswith("late:")] == [
        "late:agent_start",
        "late:turn_start",
        "late:model_request",
        "late:model_response",
        "late:agent_end",
    ]


async def test_observers_without_a_destination(autojump_clock: Clock) -> None:
    log: list[str] = []
    await Agent(model=ScriptedModel(["hi"]), hooks=[Observer(log, "o")]).run("x")
    assert log == ["o:agent_start", "o:turn_start", "o:model_request", "o:model_response",
                   "o:agent_end"]


class ModelHook:
    def __init__(self, before: Any = None, after: Any = None) -> None:
        self.before = before
        self.after = after
        self.seen: list[ModelRequest] = []

    async def before_model(self, run: Run, request: ModelRequest) -> Any:
        self.seen.append(request)
        return self.before(request) if callable(self.before) else self.before

    async def after_model(self, run: Run, request: ModelRequest, response: ModelResponse) -> Any:
        return self.after(response) if callable(self.after) else self.after


async def test_before_model_replaces_the_request_not_the_history(autojump_clock: Clock) -> None:
    def shout(request: ModelRequest) -> HookResult[ModelRequest]:
        return HookResult.replace(ModelRequest((Message("user", "HI"),), ()))

    model = ScriptedModel(["ok"])
    result = await Agent(model=model, hooks=[ModelHook(before=shout)]).run("hi")
    assert model.requests == [ModelRequest((Message("user", "HI"),), ())]
    assert result.messages == (Message("user", "hi"), Message("assistant", "ok"))


async def test_interceptors_chain_in_priority_order(autojump_clock: Clock) -> None:
    class Append:
        def __init__(self, suffix: str, priority: int) -> None:
            self.suffix = suffix
            self.priority = priority

        async def before_model(self, run: Run, request: ModelRequest) -> HookResult[ModelRequest]:
            last = request.messages[-1]
            changed = Message("user", last.content + self.suffix)
            return HookResult.replace(ModelRequest((*request.messages[:-1], changed)))

    model = ScriptedModel(["ok"])
    await Agent(model=model, hooks=[Append("2", 5), Append("1", -1), Append("3", 5)]).run("x")
    assert model.requests[0].messages == (Message("user", "x123"),)


async def test_after_model_replaces_the_response(autojump_clock: Clock) -> None:
    def polite(response: ModelResponse) -> HookResult[ModelResponse]:
        return HookResult.replace(ModelResponse(Message("assistant", "please")))

    rec = Recorder()
    hook = ModelHook(after=polite)
    result = await Agent(model=ScriptedModel(["no"]), hooks=[hook]).run("x", emit=rec)
    assert result.output == "please"
    assert rec.events[3].message == Message("assistant", "please")


async def test_a_hook_abort_ends_the_run_aborted(autojump_clock: Clock) -> None:
    rec = Recorder()
    model = ScriptedModel(["never"])
    hook = ModelHook(before=HookResult.abort("over budget"))
    result = await Agent(model=model, hooks=[hook]).run("x", emit=rec)
    assert result.summary.end_reason is EndReason.aborted
    assert result.summary.error is None
    assert result.output == ""
    assert model.requests == []
    assert rec.kinds == ["agent_start", "turn_start", "interrupt_received", "agent_end"]
    assert rec.events[2].text == "abort: hook 'ModelHook' before_model: over budget"
    assert result.messages == (Message("user", "x"),)


async def test_after_model_abort_rolls_back_the_turn(autojump_clock: Clock) -> None:
    hook = ModelHook(after=HookResult.abort("no"))
    tool = RecordingTool("echo")
    model = ScriptedModel([tool_call_reply("echo")])
    result = await Agent(model=model, tools=[tool], hooks=[hook]).run("x")
    assert result.summary.end_reason is EndReason.aborted
    assert result.messages == (Message("user", "x"),)
    assert tool.calls == []


class Slow:
    name = "slow"

    async def before_model(self, run: Run, request: ModelRequest) -> None:
        await trio.sleep(100)


async def test_a_hook_that_times_out_is_skipped_with_an_error_event(
    autojump_clock: Clock,
) -> None:
    rec = Recorder()
    result = await Agent(model=ScriptedModel(["ok"]), hooks=[Slow()]).run("x", emit=rec)
    assert result.output == "ok"
    assert result.summary.duration == 5.0
    assert rec.kinds == ["agent_start", "turn_start", "error", "model_request",
                         "model_response", "agent_end"]
    assert rec.events[2].text == "hook 'slow' before_model timed out after 5s; skipped"


async def test_hook_timeout_is_configurable(autojump_clock: Clock) -> None:
    rec = Recorder()
    agent = Agent(model=ScriptedModel(["ok"]), hooks=[Slow()], hook_timeout=0.25)
    result = await agent.run("x", emit=rec)
    assert result.summary.duration == 0.25
    assert rec.texts(EventKind.error) == ["hook 'slow' before_model timed out after 0.25s; skipped"]


async def test_a_raising_hook_is_an_error_event_and_the_run_goes_on(
    autojump_clock: Clock,
) -> None:
    def boom(request: ModelRequest) -> None:
        raise ValueError("bad hook")

    rec = Recorder()
    result = await Agent(model=ScriptedModel(["ok"]), hooks=[ModelHook(before=boom)]).run(
        "x", emit=rec
    )
    assert result.summary.end_reason is EndReason.stop
    assert rec.texts(EventKind.error) == [
        "hook 'ModelHook' before_model failed: ValueError: bad hook; skipped"
    ]


async def test_an_answer_a_hook_may_not_give_is_ignored(autojump_clock: Clock) -> None:
    rec = Recorder()
    hooks = [ModelHook(before=HookResult.deny("no"), after=HookResult.replace("text"))]
    result = await Agent(model=ScriptedModel(["ok"]), hooks=hooks).run("x", emit=rec)
    assert result.output == "ok"
    assert rec.texts(EventKind.error) == [
        "hook 'ModelHook' before_model returned HookResult(action=<HookAction.deny: 'deny'>, "
        "value=None, reason='no'), which it may not; ignored",
        "hook 'ModelHook' after_model returned HookResult(action=<HookAction.replace: "
        "'replace'>, value='text', reason=''), which it may not; ignored",
    ]


async def test_an_observer_failing_on_a_hook_error_is_not_reported_again(
    autojump_clock: Clock,
) -> None:
    class Fragile:
        async def on_event(self, event: Event) -> None:
            raise RuntimeError(str(event.kind))

    rec = Recorder()
    result = await Agent(model=ScriptedModel(["ok"]), hooks=[Fragile()]).run("x", emit=rec)
    assert result.summary.end_reason is EndReason.stop
    assert rec.kinds == [
        "agent_start", "error", "turn_start", "error", "model_request", "error",
        "model_response", "error", "agent_end", "error",
    ]
    assert rec.events[1].text == (
        "hook 'Fragile' on_event failed: RuntimeError: agent_start; skipped"
    )


class ToolHook:
    def __init__(self, before: Any = None, after: Any = None) -> None:
        self.before = before
        self.after = after

    async def before_tool(self, run: Run, call: ToolCall) -> Any:
        return self.before(call) if callable(self.before) else self.before

    async def after_tool(self, run: Run, call: ToolCall, outcome: ToolOutcome) -> Any:
        return self.after(call, outcome) if callable(self.after) else self.after


async def test_before_tool_changes_the_arguments_and_keeps_the_id(autojump_clock: Clock) -> None:
    def rewrite(call: ToolCall) -> HookResult[ToolCall]:
        return HookResult.replace(ToolCall("other-id", call.name, '{"safe": true}'))

    rec = Recorder()
    tool = RecordingTool("echo", lambda a: a)
    model = ScriptedModel([tool_call_reply("echo", '{"rm": 1}', id="c1"), "done"])
    result = await Agent(model=model, tools=[tool], hooks=[ToolHook(before=rewrite)]).run(
        "x", emit=rec
    )
    assert tool.calls == ['{"safe": true}']
    assert result.messages[2] == Message("tool", '{"safe": true}', tool_call_id="c1")
    tool_end = next(e for e in rec.events if e.kind is EventKind.tool_end)
    assert tool_end.call == ToolCall("c1", "echo", '{"safe": true}')


async def test_before_tool_denies(autojump_clock: Clock) -> None:
    rec = Recorder()
    tool = RecordingTool("echo")
    model = ScriptedModel([tool_call_reply("echo", id="c1"), "done"])
    hook = ToolHook(before=HookResult.deny("not today"))
    result = await Agent(model=model, tools=[tool], hooks=[hook]).run("x", emit=rec)
    assert tool.calls == []
    assert result.messages[2] == Message("tool", "denied: not today", tool_call_id="c1",
                                         is_error=True)
    assert result.summary.denied == 1
    assert "gate_decision" not in rec.kinds


async def test_after_tool_replaces_the_outcome(autojump_clock: Clock) -> None:
    def redact(call: ToolCall, outcome: ToolOutcome) -> HookResult[ToolOutcome]:
        return HookResult.replace(ToolOutcome("[redacted]"))

    tool = RecordingTool("echo", ValueError("secret"))
    model = ScriptedModel([tool_call_reply("echo", id="c1"), "done"])
    result = await Agent(model=model, tools=[tool], hooks=[ToolHook(after=redact)]).run("x")
    assert result.messages[2] == Message("tool", "[redacted]", tool_call_id="c1")
    assert result.summary.tool_errors == 0


async def test_before_tool_abort_starts_no_tool(autojump_clock: Clock) -> None:
    tool = RecordingTool("echo")
    model = ScriptedModel([tool_call_reply("echo", id="c1"), "done"])
    hook = ToolHook(before=HookResult.abort("stop"))
    result = await Agent(model=model, tools=[tool], hooks=[hook]).run("x")
    assert result.summary.end_reason is EndReason.aborted
    assert tool.calls == []
    assert result.messages == (Message("user", "x"),)
    assert result.summary.tool_calls == 1


async def test_hooks_see_current_run(autojump_clock: Clock) -> None:
    from agentcore import current_run

    seen: list[Run | None] = []

    class Look:
        async def before_tool(self, run: Run, call: ToolCall) -> None:
            seen.append(current_run())
            assert current_run() is run

    model = ScriptedModel([tool_call_reply("echo"), "done"])
    run = Agent(model=model, tools=[RecordingTool("echo")], hooks=[Look()]).new_run("x")
    await run.run()
    assert seen == [run]


async def test_a_hook_abort_inside_a_concurrent_batch(autojump_clock: Clock) -> None:
    def stop_second(call: ToolCall) -> HookResult[ToolCall] | None:
        return HookResult.abort("enough") if call.id == "r2" else None

    read = RecordingTool("read", read_only=True, delay=1)
    calls = tuple(ToolCall(f"r{i}", "read") for i in range(4))
    model = ScriptedModel([Message("assistant", "", tool_calls=calls), "never"])
    agent = Agent(model=model, tools=[read], hooks=[ToolHook(before=stop_second)])
    result = await agent.run("x")
    assert result.summary.end_reason is EndReason.aborted
    assert result.summary.duration == 0.0
    assert len(read.calls) <= 2
    assert read.active == 0
    assert result.messages == (Message("user", "x"),)


# -- before_tool fails closed (issue 13 item 6) ------------------------------------------


class Guard:
    """A policy hook that denies writes, and raises or hangs on what it cannot read."""

    name = "guard"

    def __init__(self, log: list[str] | None = None) -> None:
        self.log = log if log is not None else []

    async def before_tool(self, run: Run, call: ToolCall) -> HookResult[ToolCall] | None:
        self.log.append(call.id)
        if call.arguments == "hang":
            await trio.sleep_forever()
        if json.loads(call.arguments).get("path", "").startswith("/etc"):
            return HookResult.deny("no writes under /etc")
        return None


async def run_guarded(
    arguments: str, *hooks: object, **agent: Any
) -> tuple[Any, Recorder, RecordingTool, MemorySink]:
    sink = MemorySink()
    rec = Recorder()
    tool = RecordingTool("write")
    model = ScriptedModel([tool_call_reply("write", arguments, id="c1"), "done"])
    result = await Agent(model=model, tools=[tool], hooks=hooks or [Guard()], audit=sink,
                         **agent).run("x", emit=rec)
    return result, rec, tool, sink


async def test_a_raising_before_tool_denies_the_call(autojump_clock: Clock) -> None:
    result, rec, tool, sink = await run_guarded("not json")
    reason = (
        "hook 'guard' before_tool failed: JSONDecodeError: Expecting value: "
        "line 1 column 1 (char 0)"
    )
    assert tool.calls == []
    assert result.output == "done"
    assert result.summary.denied == 1
    assert result.summary.duration == 0.0
    assert result.messages[2] == Message("tool", f"denied: {reason}", tool_call_id="c1",
                                         is_error=True)
    assert rec.kinds == [
        "agent_start", "turn_start", "model_request", "model_response", "tool_start",
        "error", "gate_decision", "tool_end", "turn_start", "model_request",
        "model_response", "agent_end",
    ]
    assert rec.texts(EventKind.error) == [f"{reason}; the call is denied"]
    decision = rec.of(EventKind.gate_decision)[0]
    assert decision.call == ToolCall("c1", "write", "not json")
    assert decision.decision == GateDecision(False, reason)
    assert [e.kind for e in sink.entries] == [
        "prompt", "model_response", "tool_request", "gate_decision", "tool_result",
        "model_response", "run_end",
    ]
    entry = sink.entries[3]
    assert (entry.tool, entry.call_id, entry.verdict, entry.reason) == (
        "write", "c1", "deny", reason
    )
    assert sink.entries[4].error == f"denied: {reason}"


async def test_a_before_tool_past_its_timeout_denies_the_call(autojump_clock: Clock) -> None:
    result, rec, tool, sink = await run_guarded("hang", hook_timeout=2.5)
    reason = "hook 'guard' before_tool timed out after 2.5s"
    assert tool.calls == []
    assert result.summary.duration == 2.5
    assert result.messages[2].content == f"denied: {reason}"
    assert rec.texts(EventKind.error) == [f"{reason}; the call is denied"]
    assert rec.of(EventKind.gate_decision)[0].decision == GateDecision(False, reason)
    gate_entry = next(e for e in sink.entries if e.kind == "gate_decision")
    assert (gate_entry.verdict, gate_entry.reason) == ("deny", reason)


async def test_a_hook_denial_and_a_pass_are_unchanged(autojump_clock: Clock) -> None:
    result, rec, tool, _sink = await run_guarded('{"path": "/etc/passwd"}')
    assert result.messages[2].content == "denied: no writes under /etc"
    assert "error" not in rec.kinds
    assert "gate_decision" not in rec.kinds
    result, rec, tool, _sink = await run_guarded('{"path": "notes"}')
    assert tool.calls == ['{"path": "notes"}']
    assert rec.of(EventKind.gate_decision)[0].decision == GateDecision(True, "allowed")


async def test_the_hooks_after_a_failed_before_tool_are_not_called(
    autojump_clock: Clock,
) -> None:
    first: list[str] = []
    later: list[str] = []

    class Later(Guard):
        name = "later"
        priority = 1

    result, _rec, _tool, _sink = await run_guarded("not json", Guard(first), Later(later))
    assert first == ["c1"]
    assert later == []
    assert result.summary.denied == 1


async def test_an_answer_before_tool_may_not_give_denies_the_call(
    autojump_clock: Clock,
) -> None:
    hook = ToolHook(before="yes")
    result, rec, tool, _sink = await run_guarded("{}", hook)
    reason = "hook 'ToolHook' before_tool returned 'yes', which it may not"
    assert tool.calls == []
    assert result.messages[2].content == f"denied: {reason}"
    assert rec.texts(EventKind.error) == [f"{reason}; the call is denied"]
    assert rec.of(EventKind.gate_decision)[0].decision == GateDecision(False, reason)


async def test_a_failing_after_tool_is_still_skipped(autojump_clock: Clock) -> None:
    def boom(call: ToolCall, outcome: ToolOutcome) -> None:
        raise ValueError("after")

    result, rec, tool, _sink = await run_guarded("{}", ToolHook(after=boom))
    assert tool.calls == ["{}"]
    assert result.messages[2] == Message("tool", "ok", tool_call_id="c1")
    assert rec.texts(EventKind.error) == [
        "hook 'ToolHook' after_tool failed: ValueError: after; skipped"
    ]
    assert result.summary.denied == 0


async def test_a_failed_before_tool_denies_only_its_call_in_a_batch(
    autojump_clock: Clock,
) -> None:
    def pick(call: ToolCall) -> None:
        if call.id == "r1":
            raise KeyError("r1")

    read = RecordingTool("read", read_only=True, delay=1)
    calls = tuple(ToolCall(f"r{i}", "read") for i in range(3))
    model = ScriptedModel([Message("assistant", "", tool_calls=calls), "done"])
    result = await Agent(model=model, tools=[read], hooks=[ToolHook(before=pick)]).run("x")
    assert result.output == "done"
    assert result.summary.duration == 1.0
    assert len(read.calls) == 2
    assert [m.content for m in result.messages[2:5]] == [
        "ok", "denied: hook 'ToolHook' before_tool failed: KeyError: 'r1'", "ok",
    ]
