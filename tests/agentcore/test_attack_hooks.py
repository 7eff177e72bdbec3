"""Attacks on the hooks' fail-closed promise: answers of the wrong shape."""

from __future__ import annotations

from typing import Any

import trio.testing

from agentcore import EventKind, GateDecision, HookResult, ToolCall
from tests.agentcore.test_hooks import ToolHook, run_guarded

Clock = trio.testing.MockClock


def deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


async def test_a_before_tool_answer_too_deep_to_repr_denies_the_call(
    autojump_clock: Clock,
) -> None:
    # The reason quotes the answer: a repr that raises RecursionError must not
    # escape the hook machinery (the run would end in error instead of a denial).
    hook = ToolHook(before=lambda call: HookResult.replace(deep(100_000)))
    result, rec, tool, _sink = await run_guarded("{}", hook)
    assert tool.calls == []
    assert result.summary.denied == 1
    decision = rec.of(EventKind.gate_decision)[0].decision
    assert decision is not None
    reason = decision.reason
    assert reason.startswith("hook 'ToolHook' before_tool returned <HookResult")
    assert reason.endswith(", which it may not")


async def test_a_huge_wrong_answer_is_quoted_briefly(autojump_clock: Clock) -> None:
    hook = ToolHook(before="x" * 1_000_000)
    _result, rec, tool, _sink = await run_guarded("{}", hook)
    assert tool.calls == []
    decision = rec.of(EventKind.gate_decision)[0].decision
    shown = "'" + "x" * 97 + "..." + "x" * 98 + "'"
    assert decision == GateDecision(
        False, f"hook 'ToolHook' before_tool returned {shown}, which it may not"
    )


async def test_a_wrong_answer_from_after_tool_is_ignored(autojump_clock: Clock) -> None:
    hook = ToolHook(after=lambda call, outcome: deep(100_000))
    result, rec, tool, _sink = await run_guarded("{}", hook)
    assert tool.calls == ["{}"]
    assert result.output == "done"
    [error] = rec.texts(EventKind.error)
    assert error == (
        "hook 'ToolHook' after_tool returned [[[[[[[...]]]]]]], which it may not; ignored"
    )


async def test_a_replaced_call_with_arguments_that_are_not_text(autojump_clock: Clock) -> None:
    bad = ToolCall("c1", "write", 7)  # type: ignore[arg-type]
    hook = ToolHook(before=lambda call: HookResult.replace(bad))
    result, _rec, tool, _sink = await run_guarded("{}", hook)
    assert tool.calls == []
    assert result.output == "done"
    assert result.messages[2].content == (
        "invalid JSON arguments for tool 'write': arguments must be JSON text, not int"
    )
