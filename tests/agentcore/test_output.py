"""Typed output (``Agent(output_type=...)``): the ``final_result`` tool and its schema,
valid and invalid attempts, text answers, exhaustion into ``OutputValidationError``,
the other calls of a ``final_result`` turn, events, the ledger (fail closed), and a
property: random invalid arguments always give an error result naming a field."""

from __future__ import annotations

import json
from typing import Any, Literal

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

import ledger
from agentcore import (
    FINAL_RESULT,
    Agent,
    AuditError,
    ConfigurationError,
    EndReason,
    EventKind,
    FunctionTool,
    Message,
    OutputValidationError,
    ToolCall,
    TypedOutput,
)
from agentcore._run._output import (
    ACCEPTED,
    CALL_FINAL_RESULT,
    SKIPPED_FOR_OUTPUT,
    SKIPPED_SECOND,
    TEXT_ANSWER,
)
from agentcore.testing import ScriptedModel, tool_call_reply
from tests._failing_sink import DISK_FULL, FailingSink
from tests.agentcore._support import LIST_FACTORY, Recorder

Clock = trio.testing.MockClock


@attrs.frozen
class Finding:
    """One finding of a review."""

    path: str
    line: int
    severity: Literal["low", "high"] = "low"


@attrs.frozen
class Review:
    """What a reviewer found."""

    findings: list[Finding]
    summary: str


GOOD = '{"findings": [{"path": "a.py", "line": 3, "severity": "high"}], "summary": "one"}'
BAD_LINE = '{"findings": [{"path": "a.py", "line": "three"}], "summary": "one"}'
BAD_LINE_ERROR = (
    "final_result: invalid arguments: Expected `int`, got `str` - at `$.findings[0].line`"
)


def answer(arguments: str, id: str) -> Message:
    return tool_call_reply(FINAL_RESULT, arguments, id=id)


def test_object_type_schema_is_its_fields() -> None:
    agent = Agent(model=ScriptedModel([]), output_type=Review)
    spec = agent.tool_specs[-1]
    assert spec.name == "final_result"
    assert spec.description == (
        "Give your final answer with this tool; calling it with valid arguments ends your "
        "work. Call it alone (other tool calls in the same turn are not run). Its "
        "arguments are the answer (a Review)."
    )
    assert spec.parameters == {
        "description": "What a reviewer found.",
        "type": "object",
        "properties": {
            "findings": {"type": "array", "items": {"$ref": "#/$defs/Finding"}},
            "summary": {"type": "string"},
        },
        "required": ["findings", "summary"],
        "$defs": {
            "Finding": {
                "title": "Finding",
                "description": "One finding of a review.",
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "line": {"type": "integer"},
                    "severity": {"enum": ["high", "low"], "default": "low"},
                },
                "required": ["path", "line"],
            }
        },
    }


def test_non_object_type_is_wrapped_in_result() -> None:
    agent = Agent(model=ScriptedModel([]), output_type=list[Finding])
    spec = agent.tool_specs[-1]
    assert spec.description.endswith(
        "The answer is a list[Finding], not an object: put it in the `result` field."
    )
    assert spec.parameters["properties"] == {
        "result": {"type": "array", "items": {"$ref": "#/$defs/Finding"}}
    }
    assert spec.parameters["required"] == ["result"]
    assert spec.parameters["additionalProperties"] is False


@attrs.frozen
class Node:
    """A tree."""

    name: str
    children: list[Node] = attrs.Factory(list)


def test_recursive_type_keeps_itself_in_defs() -> None:
    params = TypedOutput(Node).parameters
    assert params["properties"]["children"] == {
        "type": "array", "items": {"$ref": "#/$defs/Node"}, **LIST_FACTORY
    }
    assert params["$defs"]["Node"]["properties"]["name"] == {"type": "string"}


async def test_bad_then_good_answer_ends_the_run(autojump_clock: Clock) -> None:
    rec = Recorder()
    sink = ledger.MemorySink()
    model = ScriptedModel([answer(BAD_LINE, "c1"), answer(GOOD, "c2")])
    agent = Agent(model=model, output_type=Review, audit=sink)
    result = await agent.run("review", emit=rec)
    assert result.summary.end_reason is EndReason.stop
    assert result.structured == Review([Finding("a.py", 3, "high")], "one")
    assert result.output == (
        '{"findings":[{"line":3,"path":"a.py","severity":"high"}],"summary":"one"}'
    )
    assert (result.summary.turns, result.summary.tool_calls, result.summary.tool_errors) == (
        2, 2, 1
    )
    assert result.messages[-3:] == (
        Message("tool", BAD_LINE_ERROR, tool_call_id="c1", is_error=True),
        answer(GOOD, "c2"),
        Message("tool", ACCEPTED, tool_call_id="c2"),
    )
    checks = rec.of(EventKind.output_validation)
    assert [(e.text, e.is_error, e.call and e.call.id, e.turn) for e in checks] == [
        (BAD_LINE_ERROR, True, "c1", 1),
        ("ok", False, "c2", 2),
    ]
    assert rec.kinds == [
        "agent_start", "turn_start", "model_request", "model_response", "output_validation",
        "turn_start", "model_request", "model_response", "output_validation", "agent_end",
    ]
    entries = [e for e in sink.entries if e.kind == "output_validation"]
    assert [(e.tool, e.call_id, e.arguments, e.verdict, e.error) for e in entries] == [
        ("final_result", "c1", BAD_LINE, "error", BAD_LINE_ERROR),
        ("final_result", "c2", GOOD, "ok", None),
    ]
    assert [e.kind for e in sink.entries] == [
        "prompt", "model_response", "output_validation", "model_response",
        "output_validation", "run_end",
    ]
    # The model was offered final_result on every call.
    assert all(r.tools[-1].name == "final_result" for r in model.requests)


async def test_text_answer_is_an_invalid_attempt(autojump_clock: Clock) -> None:
    rec = Recorder()
    model = ScriptedModel(["it is fine", tool_call_reply(FINAL_RESULT, '{"result": 7}', id="c")])
    result = await Agent(model=model, output_type=int).run("count", emit=rec)
    assert (result.output, result.structured) == ("7", 7)
    assert result.messages[1:3] == (
        Message("assistant", "it is fine"),
        Message("user", CALL_FINAL_RESULT),
    )
    assert next((e.text, e.is_error, e.call) for e in rec.of(EventKind.output_validation)) == (
        TEXT_ANSWER, True, None
    )


async def test_exhaustion_ends_the_run_error(autojump_clock: Clock) -> None:
    rec = Recorder()
    model = ScriptedModel([
        "prose",
        answer(BAD_LINE, "c1"),
        answer('{"summary": "x"}', "c2"),
    ])
    agent = Agent(model=model, output_type=Review, output_retries=2)
    result = await agent.run("review", emit=rec)
    message = (
        "no valid final_result after 3 invalid attempts (output_retries=2); the last: "
        "final_result: invalid arguments: Object missing required field `findings`"
    )
    assert result.summary.end_reason is EndReason.error
    assert type(result.exception) is OutputValidationError
    assert str(result.exception) == message
    assert result.summary.error == f"OutputValidationError: {message}"
    assert (result.output, result.structured) == ("", None)
    assert rec.texts(EventKind.error) == [f"OutputValidationError: {message}"]
    assert len(model.requests) == 3


async def test_zero_retries_ends_at_the_first_invalid_attempt(autojump_clock: Clock) -> None:
    result = await Agent(model=ScriptedModel(["prose"]), output_type=int,
                         output_retries=0).run("x")
    assert str(result.exception) == (
        "no valid final_result after 1 invalid attempts (output_retries=0); the last: "
        f"{TEXT_ANSWER}"
    )


async def test_other_calls_of_a_final_result_turn_are_not_run(autojump_clock: Clock) -> None:
    ran: list[str] = []

    async def note(arguments: str) -> str:
        ran.append(arguments)
        return "noted"

    rec = Recorder()
    tool = FunctionTool("note", "Note something.", {"type": "object"}, note)
    turn = Message("assistant", "", tool_calls=(
        ToolCall("n1", "note", "{}"),
        ToolCall("f1", FINAL_RESULT, BAD_LINE),
        ToolCall("f2", FINAL_RESULT, GOOD),
    ))
    turn2 = Message("assistant", "", tool_calls=(
        ToolCall("f3", FINAL_RESULT, GOOD),
        ToolCall("n2", "note", "{}"),
    ))
    agent = Agent(model=ScriptedModel([turn, turn2]), tools=[tool], output_type=Review)
    result = await agent.run("x", emit=rec)
    assert ran == []
    assert result.structured == Review([Finding("a.py", 3, "high")], "one")
    assert result.messages[2:5] == (
        Message("tool", SKIPPED_FOR_OUTPUT, tool_call_id="n1", is_error=True),
        Message("tool", BAD_LINE_ERROR, tool_call_id="f1", is_error=True),
        Message("tool", SKIPPED_SECOND, tool_call_id="f2", is_error=True),
    )
    assert result.messages[6:] == (
        Message("tool", ACCEPTED, tool_call_id="f3"),
        Message("tool", SKIPPED_FOR_OUTPUT, tool_call_id="n2", is_error=True),
    )
    assert [e.call.id for e in rec.of(EventKind.tool_skipped) if e.call] == ["n1", "f2", "n2"]
    assert result.summary.tool_calls == 5


async def test_tools_then_final_result(autojump_clock: Clock) -> None:
    async def look(arguments: str) -> str:
        return "line 3"

    tool = FunctionTool("look", "Look.", {"type": "object"}, look)
    model = ScriptedModel([tool_call_reply("look", "{}", id="l"), answer(GOOD, "f")])
    result = await Agent(model=model, tools=[tool], output_type=Review).run("x")
    assert result.messages[2] == Message("tool", "line 3", tool_call_id="l")
    assert result.structured is not None


async def test_structured_is_none_for_text_runs(autojump_clock: Clock) -> None:
    agent = Agent(model=ScriptedModel(["plain"]))
    result = await agent.run("x")
    assert (result.output, result.structured) == ("plain", None)
    assert [s.name for s in agent.tool_specs] == []
    assert agent.output is None


async def test_max_turns_leaves_structured_none(autojump_clock: Clock) -> None:
    model = ScriptedModel([answer(BAD_LINE, "c1")])
    result = await Agent(model=model, output_type=Review, max_turns=1).run("x")
    assert result.summary.end_reason is EndReason.max_turns
    assert result.structured is None


async def test_an_attempt_not_recorded_is_not_accepted(autojump_clock: Clock) -> None:
    sink = FailingSink("output_validation")
    agent = Agent(model=ScriptedModel([answer(GOOD, "c1")]), output_type=Review, audit=sink)
    result = await agent.run("x")
    assert result.summary.end_reason is EndReason.error
    assert type(result.exception) is AuditError
    assert result.summary.error == (
        f"AuditError: the audit sink failed to record 'output_validation': {DISK_FULL}"
    )
    assert (result.output, result.structured) == ("", None)


def test_configuration_errors() -> None:
    model = ScriptedModel([])

    async def fn(arguments: str) -> str:
        return ""

    clash = FunctionTool("final_result", "x", {"type": "object"}, fn)
    with pytest.raises(ConfigurationError) as info:
        Agent(model=model, tools=[clash], output_type=int)
    assert str(info.value) == (
        "Agent has a tool named 'final_result' and an output_type: the run offers its own "
        "final_result tool; rename the tool"
    )
    with pytest.raises(ConfigurationError) as info:
        Agent(model=model, output_type=int, output_retries=-1)
    assert str(info.value) == (
        "Agent output_retries must be an integer of at least 0, not -1"
    )

    class Opaque:
        pass

    with pytest.raises(ConfigurationError) as info:
        Agent(model=model, output_type=Opaque)
    assert str(info.value).startswith(
        "output_type Opaque: unsupported parameter type: type <class "
    )
    # A tool named final_result is fine without an output type.
    Agent(model=model, tools=[clash])


_FIELDS = {"findings", "summary"}
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                   max_size=3),
    max_leaves=8,
)


def _invalid(value: dict[str, Any]) -> bool:
    try:
        TypedOutput(Review).decode(json.dumps(value))
    except ValueError:
        return True
    return False


@given(
    st.fixed_dictionaries({}, optional={"findings": _JSON, "summary": _JSON}).filter(_invalid)
)
@pytest.mark.slow
def test_random_invalid_arguments_name_a_field(value: dict[str, Any]) -> None:
    """Any invalid object for final_result gives an error result naming the field
    at fault (``$.findings...``/``$.summary`` or a missing field), never an exception."""
    arguments = json.dumps(value)

    async def main() -> None:
        model = ScriptedModel([answer(arguments, "c1")])
        result = await Agent(model=model, output_type=Review, output_retries=0).run("x")
        assert type(result.exception) is OutputValidationError
        error = result.messages[-1]
        assert error.is_error and error.tool_call_id == "c1"
        assert error.content.startswith("final_result: invalid arguments: ")
        named = [f for f in _FIELDS if f"$.{f}" in error.content or f"field `{f}`" in error.content]
        assert named, error.content

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@given(st.text(max_size=40))
def test_random_argument_text_never_raises(text: str) -> None:
    async def main() -> None:
        model = ScriptedModel([answer(text, "c1"), answer(GOOD, "c2")])
        result = await Agent(model=model, output_type=Review).run("x")
        assert result.exception is None or type(result.exception) is OutputValidationError

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
