"""Attacks on the day's new surfaces (the ``review`` pass): each test is a finding
that once broke the hostile-input standard, pinned with its exact error."""

from __future__ import annotations

import pytest

from agentcore import ToolArgumentsError
from subagent import JsonSchemaOutput


def test_output_schema_huge_number_against_float_multiple_of_is_a_typed_error() -> None:
    # A model's 4000-digit integer against a float multipleOf made jsonschema
    # divide an int too large for a float: a raw OverflowError ended the run.
    schema = JsonSchemaOutput({"type": "number", "multipleOf": 0.5})
    with pytest.raises(ToolArgumentsError) as info:
        schema.decode('{"result": %s}' % ("9" * 4000))
    assert str(info.value) == (
        "invalid arguments: a number that cannot be checked against the output schema "
        "(too large, or not finite)"
    )


def test_output_schema_infinity_against_float_multiple_of_is_a_typed_error() -> None:
    schema = JsonSchemaOutput({"type": "number", "multipleOf": 0.5})
    with pytest.raises(ToolArgumentsError) as info:
        schema.decode('{"result": Infinity}')
    assert str(info.value) == (
        "invalid arguments: a number that cannot be checked against the output schema "
        "(too large, or not finite)"
    )


def test_output_schema_nan_against_float_multiple_of_is_a_typed_error() -> None:
    schema = JsonSchemaOutput({"type": "number", "multipleOf": 0.5})
    with pytest.raises(ToolArgumentsError) as info:
        schema.decode('{"result": NaN}')
    assert str(info.value) == (
        "invalid arguments: a number that cannot be checked against the output schema "
        "(too large, or not finite)"
    )
