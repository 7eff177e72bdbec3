"""Attacks on the day's new surfaces (the ``review`` pass): each test is a finding
that once broke the hostile-input standard, pinned with its exact error."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from agentcore import (
    CallStatus,
    EndReason,
    GateDecision,
    GateRequest,
    PendingCall,
    RunState,
    RunSummary,
    ToolArgumentsError,
    ToolCall,
    Usage,
)
from agentcore.testing import RecordingTool
from subagent import JsonSchemaOutput, SpecError, SubagentTool, open_pool
from subagent._cli._base import read_only_or_delegation
from subagent._cli._statefile import StateFileError, defer_changes, print_pending, write_state
from subagent._specs._outputschema import MAX_CHECK_STEPS


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


def _doubling(levels: int) -> dict[str, object]:
    # Each level refers twice to the next: 2**levels checks of the leaf, in a
    # schema of a few hundred bytes.
    defs: dict[str, object] = {
        f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"a{levels}"] = {"type": "string"}
    return {"$defs": defs, "$ref": "#/$defs/a0"}


@pytest.mark.slow
def test_output_schema_with_exponential_references_is_refused_at_load() -> None:
    # Before: loading the spec checked samples for minutes (2**levels steps),
    # freezing the event loop; 40 levels would never end.
    with pytest.raises(SpecError) as info:
        JsonSchemaOutput(_doubling(18))
    assert str(info.value) == (
        f"output_schema takes more than {MAX_CHECK_STEPS} steps to check a trivial value "
        "(references or combinations that multiply the work)"
    )


@pytest.mark.slow
def test_output_schema_work_on_a_model_reply_is_bounded() -> None:
    # A recursive schema whose work doubles per level of the model's nesting: the
    # samples are cheap, the model's 40-deep reply is not.
    schema = JsonSchemaOutput({
        "$defs": {"n": {"anyOf": [
            {"type": "array", "items": {"$ref": "#/$defs/n"}},
            {"type": "array", "items": {"$ref": "#/$defs/n"}},
        ]}},
        "$ref": "#/$defs/n",
    })
    reply = '{"result": ' + "[" * 40 + "1" + "]" * 40 + "}"
    with pytest.raises(ToolArgumentsError) as info:
        schema.decode(reply)
    assert str(info.value) == (
        f"invalid arguments: too much work to check against the output schema (more "
        f"than {MAX_CHECK_STEPS} steps)"
    )
    assert schema.decode('{"result": [[[]]]}') == [[[]]]


@pytest.mark.trio
async def test_approve_later_defers_a_foreign_tool_named_subagent() -> None:
    # Before: the gate allowed any tool called "subagent" (an MCP server may list
    # one), so under --approve-later it changed things with nobody asked.
    impostor = RecordingTool("subagent")
    request = GateRequest(("a/0001",), impostor, ToolCall("c1", "subagent", "{}"))
    assert await defer_changes(request) == GateDecision.defer(
        "tool 'subagent' may change things: approve it later"
    )
    assert await read_only_or_delegation(request) == GateDecision(
        False, "tool 'subagent' may change things and only read-only tools are allowed"
    )
    async with open_pool() as pool:
        real = GateRequest(("a/0001",), SubagentTool(pool), ToolCall("c2", "subagent", "{}"))
        assert await defer_changes(real) == GateDecision(True, "delegation")
        assert await read_only_or_delegation(real) == GateDecision(True, "delegation")


def test_output_schema_draft4_id_is_refused() -> None:
    # Draft 4 spells "$id" as "id": it moved the base of the "$ref"s under it, which
    # the load-time check resolved from the root, so the model's reply raised a raw
    # jsonschema _WrappedReferencingError (PointerToNowhere) that ended the run.
    with pytest.raises(SpecError) as info:
        JsonSchemaOutput({
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": "object",
            "properties": {"x": {"id": "http://e.example/",
                                 "allOf": [{"$ref": "#/definitions/a"}]}},
            "definitions": {"a": {"type": "string"}},
        })
    assert str(info.value) == (
        "output_schema may not use 'id' (references resolve within the schema itself "
        "only) - at `$.properties.x`"
    )
    # A property called "id" is a name, not the keyword.
    named = JsonSchemaOutput({"type": "object", "properties": {"id": {"type": "string"}},
                              "required": ["id"]})
    assert named.decode('{"id": "a"}') == {"id": "a"}


def test_pending_cuts_every_field_it_shows() -> None:
    # Before: only the arguments were cut; a state file's megabyte reason, tool
    # name or call id was printed whole on one terminal line.
    state = RunState.begin([], run_id="r1", agent="a", path=("a/0001",), input="go")
    state.summary = RunSummary(1, 1, 0, 0, Usage(), EndReason.paused, None, 1.0)
    call = ToolCall("i" * 100_000, "t" * 100_000, "{}")
    state.pending = [PendingCall(call, CallStatus.deferred, "r" * 100_000)]
    state = RunState.from_json(state.to_json())
    out = io.StringIO()
    assert print_pending(state, out) == 1
    line = out.getvalue()
    assert len(line) < 2_000
    assert line.startswith("i" * 200 + "… (200 of 100000 characters shown)  a/0001  "
                           + "t" * 200 + "… (200 of 100000 characters shown) {}  (")


def test_a_state_file_that_cannot_be_replaced_leaves_no_temporary_copy(tmp_path: Path) -> None:
    # Before: the temporary file (the whole state) stayed next to the target when
    # the rename failed (here: the target is a directory).
    target = tmp_path / "paused.json"
    target.mkdir()
    state = RunState.begin([], run_id="r1", agent="a", input="go")
    with pytest.raises(StateFileError) as info:
        write_state(target, state)
    assert str(info.value) == f"cannot write the paused run {target}: Is a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["paused.json"]
