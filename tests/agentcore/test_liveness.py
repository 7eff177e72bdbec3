"""Liveness classes (SPEC 3.4, issue 6.1): opaque tools are timed by the loop,
self-monitoring tools bound themselves; the Agent checks the contract at construction.
Also the inbox options a background result uses (``InboxMessage.on_read``, ``preempts``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

from agentcore import (
    Agent,
    ConfigurationError,
    InboxMessage,
    Liveness,
    Message,
    SelfMonitoring,
    ToolCall,
    check_liveness,
)
from agentcore.testing import Blocked, RecordingTool, ScriptedModel, tool_call_reply

Clock = trio.testing.MockClock


class Monitored:
    """A self-monitoring tool that takes ``seconds`` and records its fallback bounds."""

    name = "watch"
    description = "a self-monitoring test tool"
    parameters: Mapping[str, Any] = {"type": "object"}
    liveness = Liveness.self_monitoring

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fallbacks: list[float] = []

    async def execute(self, arguments: str) -> str:
        raise AssertionError("the loop calls execute_monitored")

    async def execute_monitored(self, arguments: str, fallback_timeout: float) -> str:
        self.fallbacks.append(fallback_timeout)
        await trio.sleep(self.seconds)
        return f"watched {self.seconds:g}s"


class Undeclared(Monitored):
    liveness = Liveness.opaque


class Pretender:
    """Declares self-monitoring without implementing the contract."""

    name = "pretend"
    description = "claims to bound itself"
    parameters: Mapping[str, Any] = {"type": "object"}
    liveness = "self_monitoring"

    async def execute(self, arguments: str) -> str:
        return "never"


async def test_hung_opaque_tool_times_out_and_the_run_goes_on(autojump_clock: Clock) -> None:
    tool = RecordingTool("hang", block=True)
    model = ScriptedModel([tool_call_reply("hang", id="c1"), "carried on"])
    result = await Agent(model=model, tools=[tool]).run("go")
    assert trio.current_time() == 120.0
    assert result.output == "carried on"
    assert model.requests[1].messages[-1] == Message(
        "tool", "tool 'hang' timed out after 120s", tool_call_id="c1", is_error=True
    )
    assert (result.summary.tool_calls, result.summary.tool_errors) == (1, 1)


async def test_self_monitoring_tool_is_not_timed(autojump_clock: Clock) -> None:
    tool = Monitored(500.0)
    model = ScriptedModel([tool_call_reply("watch", id="c1"), "fine"])
    result = await Agent(model=model, tools=[tool], tool_timeout=30).run("go")
    assert trio.current_time() == 500.0
    assert tool.fallbacks == [30.0]
    assert result.messages[-2] == Message("tool", "watched 500s", tool_call_id="c1")
    assert result.summary.tool_errors == 0
    assert isinstance(tool, SelfMonitoring)


def test_declared_self_monitoring_without_the_contract_is_refused() -> None:
    with pytest.raises(ConfigurationError) as info:
        Agent(model=ScriptedModel([]), tools=[Pretender()])
    assert str(info.value) == (
        "tool 'pretend' declares liveness self_monitoring but does not implement "
        "execute_monitored (the SelfMonitoring contract); declare it opaque to have "
        "the agent's tool_timeout bound it"
    )


def test_contract_without_the_declaration_is_refused() -> None:
    with pytest.raises(ConfigurationError) as info:
        Agent(model=ScriptedModel([]), tools=[Undeclared(1.0)])
    assert str(info.value) == (
        "tool 'watch' implements execute_monitored (the SelfMonitoring contract) but "
        "declares liveness opaque; declare liveness = Liveness.self_monitoring"
    )


def test_unknown_liveness_is_refused() -> None:
    tool = RecordingTool("odd")
    tool.liveness = "sometimes"  # type: ignore[assignment]
    with pytest.raises(ConfigurationError, match=r"^tool 'odd' declares liveness 'sometimes'; "
                       r"use Liveness.opaque or Liveness.self_monitoring$"):
        Agent(model=ScriptedModel([]), tools=[tool])


def test_check_liveness_defaults_to_opaque() -> None:
    class Plain:
        name = "plain"
        description = "declares nothing"
        parameters: Mapping[str, Any] = {"type": "object"}

        async def execute(self, arguments: str) -> str:
            return ""

    assert check_liveness(Plain()) is Liveness.opaque
    assert check_liveness(Monitored(1.0)) is Liveness.self_monitoring


async def test_non_preempting_pending_keeps_the_turn_and_reports_its_read(
    autojump_clock: Clock,
) -> None:
    tool = RecordingTool("echo", block=True)
    calls = (ToolCall("c1", "echo", "{}"), ToolCall("c2", "echo", "{}"))
    model = ScriptedModel([Message("assistant", tool_calls=calls), "done"])
    run = Agent(model=model, tools=[tool]).new_run("go")
    seen: list[int] = []

    async def on_read() -> None:
        seen.append(len(run.messages))

    async def go() -> None:
        await run.run()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(go)
        await trio.testing.wait_all_tasks_blocked()
        run.put(InboxMessage(Message("user", "[result] 1"), None, on_read=on_read, preempts=False))
        assert not run.has_pending
        tool.release()
        await trio.testing.wait_all_tasks_blocked()
        tool.release()
    assert len(tool.calls) == 2
    assert [m.content for m in model.requests[1].messages[-3:]] == ["ok", "ok", "[result] 1"]
    assert seen == [len(model.requests[1].messages)]
    assert run.summary is not None and run.summary.tool_errors == 0


async def test_non_preempting_pending_still_gets_another_model_call() -> None:
    model = ScriptedModel([Blocked("first"), "second"])
    run = Agent(model=model).new_run("go")

    async def go() -> None:
        await run.run()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(go)
        await trio.testing.wait_all_tasks_blocked()
        run.put(InboxMessage(Message("user", "[result] x"), None, preempts=False))
        model.release()
    assert len(model.requests) == 2
    assert model.requests[1].messages[-1] == Message("user", "[result] x")
    assert run.summary is not None and run.summary.turns == 2
