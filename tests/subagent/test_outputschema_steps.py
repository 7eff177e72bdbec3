"""The output schema check's work is charged to its step bound and linear in the
answer (issue 33 item 3): steps are counted, never wall time."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("jsonschema")

from agentcore import ToolArgumentsError
from subagent import JsonSchemaOutput, SpecError
from subagent._outputschema import MAX_CHECK_STEPS


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


@pytest.mark.parametrize("keyword", ["unevaluatedItems", "unevaluatedProperties"])
def test_quadratic_unevaluated_keywords_are_refused(keyword: str) -> None:
    with pytest.raises(SpecError) as info:
        JsonSchemaOutput({"type": "array", "items": {keyword: False}})
    assert str(info.value).startswith(
        f"output_schema may not use {keyword!r} (its check is quadratic in the answer's size"
    )
    assert str(info.value).endswith("- at `$.items`")
