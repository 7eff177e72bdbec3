"""Typed output for subagents (issue 18 item 2): ``Spec.output_type`` end to end through
two levels of delegation (each child first answers badly, then well), the JSON the
parent is handed (waited-for and background children), exhaustion, inheritance of
``output_retries``, ``Result.structured``, and TOML ``output_schema``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import ledger
from agentcore import FINAL_RESULT, ModelRequest, OutputValidationError
from agentcore.testing import ScriptedModel, ScriptItem, tool_call_reply
from subagent import (
    Defaults,
    Event,
    JsonSchemaOutput,
    Result,
    Spec,
    SpecError,
    SpecFileError,
    Stream,
    SubagentResultsTool,
    SubagentTool,
    TaskFailed,
    load_specs,
    open_pool,
    specs_from_mapping,
)

Clock = trio.testing.MockClock


@attrs.frozen
class Finding:
    """One finding."""

    path: str
    line: int


@attrs.frozen
class Review:
    """A review."""

    findings: list[Finding]
    verdict: str


def delegate(agent: str, task: str, *, wait: bool = True, id: str = "d") -> ScriptItem:
    return tool_call_reply(
        "subagent", json.dumps({"agent": agent, "task": task, "wait": wait}), id=id
    )


def final(arguments: object, id: str) -> ScriptItem:
    return tool_call_reply(FINAL_RESULT, json.dumps(arguments), id=id)


class Seen:
    """A scripted model that keeps its requests."""

    def __init__(self, script: list[ScriptItem]) -> None:
        self.script = script
        self.requests: list[ModelRequest] = []
        self.model = ScriptedModel(self.answer)

    def answer(self, request: ModelRequest) -> ScriptItem:
        self.requests.append(request)
        return self.script[len(self.requests) - 1]


async def collect(stream: Stream, into: list[Event]) -> None:
    async for event in stream:
        into.append(event)


async def test_two_level_delegation_with_typed_children(autojump_clock: Clock) -> None:
    checker = Seen([
        final({"result": [{"path": "a.py", "line": "ten"}]}, "k1"),
        final({"result": [{"path": "a.py", "line": 10}]}, "k2"),
    ])
    reviewer = Seen([
        delegate("checker", "check a.py", id="r1"),
        "looks fine",
        final({"findings": [{"path": "a.py", "line": 10}], "verdict": "fix"}, "r2"),
    ])
    lead = Seen([delegate("reviewer", "review a.py", id="l1"), "merged"])
    sink = ledger.MemorySink()
    events: list[Event] = []
    stream = Stream(256)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect, stream, events)
        async with open_pool(events=stream, defaults=Defaults(audit=sink)) as pool:
            tool = SubagentTool(pool)
            pool.register(Spec("lead", model=lead.model, tools=[tool]))
            pool.register(Spec("reviewer", model=reviewer.model, tools=[tool],
                               output_type=Review))
            pool.register(Spec("checker", model=checker.model, output_type=list[Finding]))
            result = await (await pool.submit("lead", "review the change")).wait()
        stream.close()
    assert (result.output, result.structured) == ("merged", None)
    # The reviewer got the checker's answer as JSON (a value, not a string).
    handed = reviewer.requests[1].messages[-1]
    assert handed.tool_call_id == "r1"
    assert handed.content == (
        '{"agent": "checker", "path": ["lead/0001", "reviewer/0002", "checker/0003"], '
        '"output": [{"line":10,"path":"a.py"}]}'
    )
    assert json.loads(handed.content)["output"] == [{"line": 10, "path": "a.py"}]
    # The reviewer's text answer was an invalid attempt; its final_result the answer.
    assert reviewer.requests[2].messages[-1].content.startswith(
        "Your answer must be given by calling the final_result tool"
    )
    assert lead.requests[1].messages[-1].content == (
        '{"agent": "reviewer", "path": ["lead/0001", "reviewer/0002"], '
        '"output": {"findings":[{"line":10,"path":"a.py"}],"verdict":"fix"}}'
    )
    checks = [
        (e.path, e.event.text, e.event.is_error)
        for e in events
        if e.event is not None and e.kind == "output_validation"
    ]
    assert checks == [
        (("lead/0001", "reviewer/0002", "checker/0003"),
         "final_result: invalid arguments: Expected `int`, got `str` - at `$.result[0].line`",
         True),
        (("lead/0001", "reviewer/0002", "checker/0003"), "ok", False),
        (("lead/0001", "reviewer/0002"),
         "the answer was text; give it by calling the final_result tool", True),
        (("lead/0001", "reviewer/0002"), "ok", False),
    ]
    entries = [(e.path, e.call_id, e.verdict) for e in sink.entries
               if e.kind == "output_validation"]
    assert entries == [
        (("lead/0001", "reviewer/0002", "checker/0003"), "k1", "error"),
        (("lead/0001", "reviewer/0002", "checker/0003"), "k2", "ok"),
        (("lead/0001", "reviewer/0002"), None, "error"),
        (("lead/0001", "reviewer/0002"), "r2", "ok"),
    ]


async def test_result_structured_on_the_task(autojump_clock: Clock) -> None:
    model = ScriptedModel([final({"findings": [], "verdict": "ok"}, "f")])
    async with open_pool() as pool:
        pool.register(Spec("r", model=model, output_type=Review))
        pool.register(Spec("t", model=ScriptedModel(["plain"])))
        typed = await (await pool.submit("r", "go")).wait()
        text = await (await pool.submit("t", "go")).wait()
    assert typed.structured == Review([], "ok")
    assert typed.output == '{"findings":[],"verdict":"ok"}'
    assert (text.output, text.structured) == ("plain", None)


async def test_exhaustion_fails_the_task(autojump_clock: Clock) -> None:
    model = ScriptedModel(["a", "b"])
    async with open_pool() as pool:
        pool.register(Spec("r", model=model, output_type=Review, output_retries=1))
        task = await pool.submit("r", "go")
        with pytest.raises(TaskFailed) as info:
            await task.wait()
    cause = info.value.__cause__
    assert type(cause) is OutputValidationError
    assert str(cause) == (
        "no valid final_result after 2 invalid attempts (output_retries=1); the last: "
        "the answer was text; give it by calling the final_result tool"
    )


async def test_background_typed_child_hands_its_json(autojump_clock: Clock) -> None:
    child = ScriptedModel([final({"result": 42}, "c")])
    parent = Seen([
        delegate("counter", "count", wait=False, id="p1"),
        tool_call_reply("subagent_results", "{}", id="p2"),
        "done",
    ])
    async with open_pool() as pool:
        pool.register(Spec("parent", model=parent.model,
                           tools=[SubagentTool(pool), SubagentResultsTool(pool)]))
        pool.register(Spec("counter", model=child, output_type=int))
        result = await (await pool.submit("parent", "go")).wait()
    assert result.output == "done"
    delivered = [m.content for m in parent.requests[2].messages if m.role == "user"]
    assert delivered[-1] == (
        '[subagent result] {"agent": "counter", "path": ["parent/0001", "counter/0002"], '
        '"output": 42}'
    )


async def always_bad_calls(spec: Spec, defaults: Defaults) -> int:
    calls = 0

    def answer(request: ModelRequest) -> ScriptItem:
        nonlocal calls
        calls += 1
        return "prose"

    async with open_pool(defaults=defaults) as pool:
        pool.register(attrs.evolve(spec, model=ScriptedModel(answer)))
        with pytest.raises(TaskFailed):
            await (await pool.submit(spec.name, "go")).wait()
    return calls


@pytest.mark.parametrize(("own", "inherited", "expected"),
                         [(0, 1, 0), (None, 1, 1), (None, None, 2), (3, None, 3)])
async def test_output_retries_inherit(
    autojump_clock: Clock, own: int | None, inherited: int | None, expected: int
) -> None:
    spec = Spec("r", output_type=int, output_retries=own)
    calls = await always_bad_calls(spec, Defaults(output_retries=inherited))
    assert calls == expected + 1


def test_spec_errors() -> None:
    class Opaque:
        pass

    cases: list[tuple[Spec, str]] = [
        (Spec("r", model=ScriptedModel([]), output_retries=-1),
         "spec 'r': output_retries must be an integer of at least 0, not -1"),
        (Spec("r", model=ScriptedModel([]), output_type=Opaque),
         "spec 'r': output_type Opaque: unsupported parameter type: type <class "),
    ]
    for spec, message in cases:
        with pytest.raises(SpecError) as info:
            spec.inherit(Defaults())
        assert str(info.value).startswith(message)


SCHEMA_TOML = """
[defaults]
model = "m"
output_retries = 0

[agents.r]
output_retries = 1

[agents.r.output_schema]
type = "object"
required = ["findings"]
additionalProperties = false
properties.findings = { type = "array", items = { type = "integer", minimum = 1 } }
"""


async def test_toml_output_schema(autojump_clock: Clock, tmp_path: Path) -> None:
    path = tmp_path / "specs.toml"
    path.write_text(SCHEMA_TOML)
    seen = Seen([
        final({"findings": [3, 0]}, "a"),
        final({"findings": [3, 4]}, "b"),
    ])
    specs = load_specs(path, resolve_model=lambda name, **_: seen.model)
    (spec,) = specs.specs
    assert isinstance(spec.output_type, JsonSchemaOutput)
    assert (spec.output_retries, specs.defaults.output_retries) == (1, 0)
    offered = spec.output_type.tool_spec
    assert offered.parameters == {
        "type": "object",
        "required": ["findings"],
        "additionalProperties": False,
        "properties": {"findings": {"type": "array", "items": {"type": "integer", "minimum": 1}}},
    }
    async with open_pool(defaults=specs.defaults) as pool:
        pool.register(spec)
        result = await (await pool.submit("r", "go")).wait()
    assert seen.requests[1].messages[-1].content == (
        "final_result: invalid arguments: 0 is less than the minimum of 1 - at `$.findings[1]`"
    )
    assert result.structured == {"findings": [3, 4]}
    assert result.output == '{"findings":[3,4]}'


async def test_json_schema_wrapped_value(autojump_clock: Clock) -> None:
    output = JsonSchemaOutput({"type": "array", "items": {"type": "string"}, "maxItems": 2})
    assert output.parameters == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
        "required": ["result"],
        "additionalProperties": False,
    }
    model = ScriptedModel([final({"result": ["a", "b", "c"]}, "a"), final({"result": ["a"]}, "b")])
    seen: list[Result] = []
    async with open_pool() as pool:
        pool.register(Spec("r", model=model, output_type=output))
        seen.append(await (await pool.submit("r", "go")).wait())
    assert seen[0].structured == ["a"]


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "array", "items": schema}
    return schema


SOURCE = "<mapping>: agent 'r' field"


@pytest.mark.parametrize(("schema", "message"), [
    ("object", "'output_schema': must be a table (a JSON Schema), not a string ('object')"),
    ({"type": "strin"}, "'output_schema': is not a valid JSON Schema: 'strin' is not valid "
     "under any of the given schemas - at `$.type`"),
    ({"type": "string", "pattern": "(a+)+b"}, "'output_schema': may not use 'pattern' (a "
     "regular expression on model output is refused) - at `$`"),
    ({"type": "object", "properties": {"p": {"type": "array", "uniqueItems": True}}},
     "'output_schema': may not use 'uniqueItems' (a uniqueness check on model output is "
     "refused) - at `$.properties.p`"),
    ({"$id": "https://example.com/s", "type": "string"}, "'output_schema': may not use "
     "'$id' (references resolve within the schema itself only) - at `$`"),
    ({"$ref": "#/$defs/missing"}, "'output_schema': refers to '#/$defs/missing', which it "
     "does not hold - at `$`"),
    ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "'output_schema': "
     "has references that loop without end (a $ref that leads back to itself)"),
    ({"$schema": True}, "'output_schema': field '$schema' must be a string - at `$.$schema`"),
    ({"$ref": "https://example.com/s.json"}, "'output_schema': may only refer within itself "
     "($ref starting with '#') - at `$`"),
    ({"type": "number", "maximum": float("inf")},
     "'output_schema': holds a non-finite number - at `$.maximum`"),
    (_deep(40), "'output_schema': is nested too deeply (more than 32 levels) - at "
     "`$" + ".items" * 32 + "`"),
    ({"enum": ["x" * 70_000]}, "'output_schema': is 70014 bytes as JSON; the most is 65536"),
])
def test_toml_output_schema_errors(schema: object, message: str) -> None:
    data = {"agents": {"r": {"model": "m", "output_schema": schema}}}
    with pytest.raises(SpecFileError) as info:
        specs_from_mapping(data, resolve_model=lambda name, **_: ScriptedModel([]))
    assert str(info.value) == f"{SOURCE} {message}"


def test_a_property_named_pattern_is_not_the_keyword() -> None:
    schema = {"type": "object", "properties": {"pattern": {"const": {"pattern": "x"}}}}
    assert JsonSchemaOutput(schema).decode('{"pattern": {"pattern": "x"}}') == {
        "pattern": {"pattern": "x"}
    }


def test_toml_output_retries_errors() -> None:
    for value, text in [(-1, "must be at least 0, not -1"),
                        (True, "must be an integer, not a boolean (True)")]:
        data = {"defaults": {"output_retries": value}}
        with pytest.raises(SpecFileError) as info:
            specs_from_mapping(data)
        assert str(info.value) == f"<mapping>: [defaults] field 'output_retries': {text}"


def test_without_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    data = {"agents": {"r": {"model": "m", "output_schema": {"type": "object"}}}}
    with pytest.raises(SpecFileError) as info:
        specs_from_mapping(data, resolve_model=lambda name, **_: ScriptedModel([]))
    assert str(info.value) == (
        f"{SOURCE} 'output_schema': needs the jsonschema library: "
        "pip install 'subagent[schema]'"
    )


def test_the_tree_view_shows_typed_answers() -> None:
    from agentcore import Event as CoreEvent
    from agentcore import EventKind, ToolCall
    from subagent._cli._view import TreeView

    view = TreeView()
    path = ("r/0001",)
    bad = CoreEvent(EventKind.output_validation, text="final_result: invalid\x1b[2J",
                    is_error=True)
    call = ToolCall("c", FINAL_RESULT, '{"findings": []}')
    good = CoreEvent(EventKind.output_validation, text="ok", call=call)
    assert view.update(Event(path, EventKind.output_validation, bad)) == (
        "invalid output: final_result: invalid\\x1b[2J"
    )
    assert view.update(Event(path, EventKind.output_validation, good)) == (
        'answered (typed): {"findings": []}'
    )
