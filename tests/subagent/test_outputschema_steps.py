"""The output schema check's work is charged to its step bound and linear in the
answer (issue 33 item 3): steps are counted, never wall time."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("jsonschema")

from agentcore import FINAL_RESULT, ToolArgumentsError
from agentcore.testing import ScriptedModel, tool_call_reply
from subagent import JsonSchemaOutput, Spec, open_pool
from subagent._specs._outputschema import MAX_CHECK_STEPS


def _steps(schema: dict[str, Any], value: Any) -> int:
    out = JsonSchemaOutput(schema)
    try:
        out.decode(json.dumps({"result": value}))
    except ToolArgumentsError as exc:
        assert "too much work" not in str(exc)
    return MAX_CHECK_STEPS - out._steps.left


CODES = [f"C{i:04d}" for i in range(2000)]
LOOPING: list[tuple[str, dict[str, Any], Any]] = [
    ("enum in items", {"type": "array", "items": {"enum": CODES}},
     lambda n: [CODES[i % 2000] for i in range(n)]),
    ("contains", {"type": "array", "contains": {"const": "x"}},
     lambda n: ["y"] * (n - 1) + ["x"]),
    ("prefixItems+items", {"type": "array", "prefixItems": [{"type": "integer"}],
                           "items": {"type": "integer"}}, lambda n: list(range(n))),
    ("additionalProperties", {"type": "object", "additionalProperties": {"type": "integer"}},
     lambda n: {f"k{i}": i for i in range(n)}),
    ("enum of a whole array", {"enum": [[0]]}, lambda n: [0] * n),
    ("unevaluatedItems", {"type": "array", "prefixItems": [True],
                          "anyOf": [{"contains": {"const": 1}}],
                          "unevaluatedItems": {"type": "integer"}}, lambda n: list(range(n))),
    ("unevaluatedProperties", {"allOf": [{"properties": {"k0": True}}],
                               "unevaluatedProperties": {"type": "integer"}},
     lambda n: {f"k{i}": i for i in range(n)}),
]


@pytest.mark.parametrize(("name", "schema", "make"), LOOPING, ids=[c[0] for c in LOOPING])
def test_doubled_answer_charges_at_most_two_and_a_half_times_the_steps(
    name: str, schema: dict[str, Any], make: Any
) -> None:
    one, two = _steps(schema, make(4000)), _steps(schema, make(8000))
    assert one >= 4000
    assert two <= 2.5 * one


def test_enum_in_items_charges_one_step_per_keyword_and_node() -> None:
    # 2,000 codes x 20,000 items took 7.5 s uncharged; now one lookup per item.
    schema = {"type": "array", "items": {"enum": CODES}}
    assert _steps(schema, [CODES[i % 2000] for i in range(20_000)]) == 2 + 20_000 * 2


def test_enum_charges_the_size_of_the_value_it_compares() -> None:
    # Before, comparing a 60,000-item array with an enum member cost one step.
    out = JsonSchemaOutput({"enum": [[0]]})
    with pytest.raises(ToolArgumentsError) as info:
        out.decode(json.dumps({"result": [0] * 60_000}))
    assert str(info.value) == (
        "invalid arguments: too much work to check against the output schema "
        f"(more than {MAX_CHECK_STEPS} steps)"
    )


@pytest.mark.parametrize(("value", "ok"), [
    (1, True), (1.0, True), (True, False), ({"a": [1.0, False]}, True),
    ({"a": [1, 0]}, False), ("1", False), (None, False),
])
def test_enum_keeps_json_schema_equality(value: Any, ok: bool) -> None:
    import jsonschema

    schema = {"enum": [1, {"a": [1, False]}]}
    out = JsonSchemaOutput(schema)
    assert jsonschema.Draft202012Validator(schema).is_valid(value) is ok
    if ok:
        assert out.decode(json.dumps({"result": value})) == value
    else:
        with pytest.raises(ToolArgumentsError, match="is not one of"):
            out.decode(json.dumps({"result": value}))


class _WaitsForHeartbeat(JsonSchemaOutput):
    """A JSON Schema output whose check first waits for a trio task's heartbeat: on
    the trio thread it would wait in vain (the heartbeat could not run)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        super().__init__(schema)
        self.checking = threading.Event()
        self.beat = threading.Event()

    def decode(self, arguments: str) -> Any:
        self.checking.set()
        if not self.beat.wait(timeout=10):
            raise AssertionError("no heartbeat while the answer was checked")
        return super().decode(arguments)


@pytest.mark.slow
async def test_a_heartbeat_runs_while_a_large_answer_is_checked() -> None:
    output = _WaitsForHeartbeat({"type": "array", "items": {"enum": CODES}})
    answer = [CODES[i % 2000] for i in range(20_000)]
    model = ScriptedModel([tool_call_reply(FINAL_RESULT, json.dumps({"result": answer}))])
    beats = 0

    async def heartbeat() -> None:
        nonlocal beats
        while True:
            if output.checking.is_set():
                beats += 1
                output.beat.set()
            await trio.sleep(0.001)

    async with open_pool() as pool, trio.open_nursery() as nursery:
        nursery.start_soon(heartbeat)
        pool.register(Spec("r", model=model, output_type=output))
        result = await (await pool.submit("r", "go")).wait()
        nursery.cancel_scope.cancel()
    assert result.structured == answer
    assert beats >= 1


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, 1.5])
    | st.sampled_from(["", "a", "b"]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
    max_leaves=6,
)
_schemas = st.recursive(
    st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(["object", "array", "string", "integer", "number",
                                 "boolean", "null"]),
        "enum": st.lists(_values, min_size=1, max_size=4),
        "const": _values,
        "minimum": st.integers(-2, 2),
        "maxItems": st.integers(0, 2),
    }),
    lambda inner: st.fixed_dictionaries({}, optional={
        "items": inner,
        "contains": inner,
        "properties": st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
        "additionalProperties": inner | st.booleans(),
        "required": st.lists(st.sampled_from(["a", "b"]), max_size=2, unique=True),
        "anyOf": st.lists(inner, min_size=1, max_size=2),
        "not": inner,
    }),
    max_leaves=4,
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(schema=_schemas, value=_values)
def test_the_counted_check_agrees_with_jsonschema(schema: dict[str, Any], value: Any) -> None:
    import jsonschema

    expected = jsonschema.Draft202012Validator(schema).is_valid(value)
    out = JsonSchemaOutput(schema)
    arguments = json.dumps(value if not out.wrapped else {"result": value})
    try:
        out.decode(arguments)
    except ToolArgumentsError as exc:
        assert "too much work" not in str(exc)
        assert not expected, str(exc)
    else:
        assert expected
