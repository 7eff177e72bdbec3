"""Tool-call arguments of any shape (SPEC 1.2, issue 13 item 3): bounded, never a crash."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from agentcore import (
    Agent,
    ArgumentsError,
    EndReason,
    EventKind,
    HookResult,
    Message,
    Run,
    ToolCall,
    load_arguments,
)
from agentcore._tools._arguments import _loads
from agentcore.limits import MAX_ARGUMENT_BYTES, MAX_ARGUMENT_DEPTH
from agentcore.testing import RecordingTool, ScriptedModel, tool_call_reply
from ledger import MemorySink
from tests.agentcore._support import Recorder

Clock = trio.testing.MockClock

TOO_DEEP = (
    "tool 'echo': arguments nested too deeply (more than 64 levels of arrays and objects)"
)
TOO_LARGE = "tool 'echo': arguments too large (more than 1048576 bytes of JSON text)"


def nested(depth: int) -> str:
    """An arguments object whose arrays and objects nest ``depth`` levels."""
    return '{"a": ' + "[" * (depth - 1) + "1" + "]" * (depth - 1) + "}"


def test_the_bounds() -> None:
    assert MAX_ARGUMENT_BYTES == 1 << 20
    assert MAX_ARGUMENT_DEPTH == 64


@pytest.mark.parametrize("depth", [1, 2, 63, 64])
def test_nesting_up_to_the_bound_is_accepted(depth: int) -> None:
    assert load_arguments(nested(depth)) == json.loads(nested(depth))


@pytest.mark.parametrize("depth", [65, 66, 900, 2_000, 100_000])
def test_nesting_past_the_bound_is_refused(depth: int) -> None:
    with pytest.raises(ArgumentsError) as info:
        load_arguments(nested(depth))
    assert str(info.value) == (
        "arguments nested too deeply (more than 64 levels of arrays and objects)"
    )


def test_unbalanced_deep_text_is_refused_as_too_deep() -> None:
    # json's scanner reaches its recursion limit before it finds the text invalid.
    with pytest.raises(ArgumentsError, match="nested too deeply"):
        load_arguments("[" * 500_000)


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"s": "[" * 5_000 + "{" * 5_000})
    assert load_arguments(text) == {"s": "[" * 5_000 + "{" * 5_000}


def test_many_shallow_containers_are_accepted() -> None:
    text = json.dumps({"a": [[] for _ in range(50_000)], "b": [{"c": [1]}] * 1_000})
    assert load_arguments(text)["b"][999] == {"c": [1]}


def test_size_is_counted_in_utf8_bytes() -> None:
    at_bound = '"' + "a" * (MAX_ARGUMENT_BYTES - 2) + '"'
    assert load_arguments(at_bound) == "a" * (MAX_ARGUMENT_BYTES - 2)
    for text in (at_bound + " ", '"' + "é" * (MAX_ARGUMENT_BYTES // 2) + '"'):
        with pytest.raises(ArgumentsError) as info:
            load_arguments(text)
        assert str(info.value) == "arguments too large (more than 1048576 bytes of JSON text)"


def test_other_failures_keep_their_types() -> None:
    with pytest.raises(ValueError, match="Expecting value"):
        load_arguments("[")
    with pytest.raises(ValueError, match="Exceeds the limit"):
        load_arguments("1" * 5_000)
    with pytest.raises(TypeError, match="arguments must be JSON text, not bytes"):
        load_arguments(b"{}")  # type: ignore[arg-type]


async def answer_after(arguments: str, **agent: Any) -> tuple[Agent, RecordingTool]:
    tool = RecordingTool("echo", lambda a: a)
    model = ScriptedModel([tool_call_reply("echo", arguments, id="c1"), "done"])
    return Agent(model=model, tools=[tool], **agent), tool


async def test_deep_arguments_are_an_error_result_and_the_run_answers(
    autojump_clock: Clock,
) -> None:
    sink = MemorySink()
    rec = Recorder()
    agent, tool = await answer_after(nested(2_000), audit=sink)
    result = await agent.run("x", emit=rec)
    assert result.output == "done"
    assert result.summary.end_reason is EndReason.stop
    assert result.summary.tool_errors == 1
    assert tool.calls == []
    assert result.messages[2] == Message("tool", TOO_DEEP, tool_call_id="c1", is_error=True)
    assert rec.kinds == [
        "agent_start", "turn_start", "model_request", "model_response", "tool_start",
        "tool_end", "turn_start", "model_request", "model_response", "agent_end",
    ]
    assert rec.of(EventKind.tool_end)[0].text == TOO_DEEP
    assert [e.kind for e in sink.entries] == [
        "prompt", "model_response", "tool_request", "tool_result", "model_response", "run_end",
    ]
    assert sink.entries[3].error == TOO_DEEP
    assert sink.entries[2].arguments == nested(2_000)


async def test_large_arguments_are_an_error_result(autojump_clock: Clock) -> None:
    agent, tool = await answer_after(json.dumps({"s": "x" * MAX_ARGUMENT_BYTES}))
    result = await agent.run("x")
    assert result.output == "done"
    assert tool.calls == []
    assert result.messages[2] == Message("tool", TOO_LARGE, tool_call_id="c1", is_error=True)


async def test_a_hook_that_chokes_on_deep_arguments_denies_the_call(
    autojump_clock: Clock,
) -> None:
    class Parses:
        async def before_tool(self, run: Run, call: ToolCall) -> HookResult[ToolCall] | None:
            json.loads(call.arguments)
            return None

    rec = Recorder()
    agent, tool = await answer_after("[" * 100_000, hooks=[Parses()])
    result = await agent.run("x", emit=rec)
    assert result.output == "done"
    assert tool.calls == []
    reason = (
        "hook 'Parses' before_tool failed: RecursionError: maximum recursion depth "
        "exceeded while decoding a JSON array from a unicode string"
    )
    assert result.messages[2].content == f"denied: {reason}"
    assert rec.texts(EventKind.error) == [f"{reason}; the call is denied"]


# -- any shape, never a raw exception ----------------------------------------------------

_leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=4),
    max_leaves=30,
)


@st.composite
def argument_texts(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["json", "deep", "unbalanced", "huge", "text", "bytes"]))
    if kind == "json":
        return json.dumps(draw(_values))
    if kind == "deep":
        depth = draw(st.integers(1, 3_000))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"k":', "}")]))
        inner = "[]" if opener == "[" else "1"
        return opener * depth + inner + closer * depth
    if kind == "unbalanced":
        return draw(st.sampled_from("[{")) * draw(st.integers(1, 200_000))
    if kind == "huge":
        char = draw(st.sampled_from("aé€😀"))
        count = (MAX_ARGUMENT_BYTES + draw(st.integers(-16, 16))) // len(char.encode())
        return '{"s": "' + char * count + '"}'
    if kind == "text":
        return draw(st.text(max_size=200))
    raw = draw(st.binary(max_size=200))
    return raw.decode("utf-8", "surrogateescape")


@pytest.mark.slow
@given(argument_texts(), st.booleans())
def test_any_arguments_give_a_result_and_the_run_answers(arguments: str, audited: bool) -> None:
    async def main() -> None:
        tool = RecordingTool("echo", "ran")
        model = ScriptedModel([tool_call_reply("echo", arguments, id="c1"), "done"])
        agent = Agent(model=model, tools=[tool], audit=MemorySink() if audited else None)
        result = await agent.run("x")
        assert result.output == "done"
        assert result.summary.end_reason is EndReason.stop
        answer = result.messages[2]
        if tool.calls:
            assert answer == Message("tool", "ran", tool_call_id="c1")
            assert isinstance(load_arguments(arguments), dict)
        else:
            assert answer.is_error
            assert answer.content.startswith(
                ("tool 'echo': arguments ", "invalid JSON arguments for tool 'echo': ",
                 "arguments for tool 'echo' must be a JSON object, not ")
            ), answer.content

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def _outcome(text: str) -> object:
    # A parse's value, or its exception's type and message.
    try:
        return ("value", json.loads(text))
    except (ValueError, TypeError, RecursionError) as exc:
        return (type(exc), str(exc))


@given(st.one_of(
    argument_texts(),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=8,
    ).map(json.dumps),
    st.text(alphabet=' \t\n{}[]":,0123456789.-eEnulltruefalse\ufeffx', max_size=12),
))
def test_the_scanner_at_once_parses_as_json_loads(text: str) -> None:
    # load_arguments scans the text at once when the value spans all of it, and
    # falls back to json.loads otherwise: the same values, the same errors.
    try:
        got: object = ("value", _loads(text))
    except (ValueError, TypeError, RecursionError) as exc:
        got = (type(exc), str(exc))
    assert repr(got) == repr(_outcome(text))
