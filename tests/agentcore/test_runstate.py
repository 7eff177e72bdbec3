"""RunState as a value: to_json / from_json, the version, the digest and the bounds
of hostile input (issue 20 item 1)."""

from __future__ import annotations

import hashlib
import json

import pytest

from agentcore import (
    CallStatus,
    EndReason,
    Message,
    PendingApproval,
    PendingCall,
    RunState,
    RunStateError,
    RunSummary,
    ToolCall,
    Usage,
)
from agentcore._run._state import Phase
from agentcore.limits import MAX_STATE_DEPTH

CALL = ToolCall("c2", "write", '{"path": "a.txt"}')


def paused_state(children: int = 0) -> RunState:
    calls = (ToolCall("c1", "look", "{}"), CALL, ToolCall("c3", "look", "{}"))
    state = RunState.begin(
        [Message("system", "be brief"), Message("user", "go"),
         Message("assistant", "turn 0", tool_calls=calls)],
        run_id="r1", agent="worker", path=("root/0001",), input="go",
    )
    state.turn, state.tool_calls, state.tool_errors, state.denied = 1, 2, 0, 0
    state.usage = Usage(10, 5, cache_read_tokens=3, model="m", cost=0.25)
    state.follow_ups = ["later"]
    state.pending = [
        PendingCall(calls[0], CallStatus.done, result="seen", is_error=False),
        PendingCall(CALL, CallStatus.deferred, "ask a human"),
        PendingCall(calls[2], CallStatus.waiting),
    ]
    state.elapsed = 2.5
    state.summary = RunSummary(1, 2, 0, 0, state.usage, EndReason.paused, None, 2.5)
    state.phase = Phase.ended
    for k in range(children):
        child = paused_state()
        child.path = ("root/0001", f"w/000{k + 2}")
        state.children.append(child)
        state.pending.append(PendingCall(ToolCall(f"d{k}", "subagent"), CallStatus.delegated,
                                         "subagent paused"))
    return state


def fields(state: RunState) -> list[object]:
    return [state.run_id, state.agent, state.path, state.input, state.messages, state.turn,
            state.tool_calls, state.tool_errors, state.denied, state.usage, state.follow_ups,
            state.reported, state.summary, state.pending, state.elapsed, state.phase,
            [fields(c) for c in state.children]]


def envelope(body: bytes, version: int = 1) -> str:
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    head = json.dumps({"format": "agentcore.RunState", "version": version, "digest": digest})
    return head[:-1] + ', "state": ' + body.decode() + "}"


def body_of(state: RunState) -> bytes:
    text = state.to_json()
    return text[text.index('"state":') + len('"state":'):-1].encode()


def test_round_trip_keeps_every_field() -> None:
    state = paused_state(children=2)
    again = RunState.from_json(state.to_json())
    assert fields(again) == fields(state)
    assert again.snapshot == tuple(state.messages)
    assert RunState.from_json(state.to_json().encode()).to_json() == state.to_json()


def test_the_text_names_its_format_version_and_digest() -> None:
    value = json.loads(paused_state().to_json())
    assert list(value) == ["format", "version", "digest", "state"]
    assert (value["format"], value["version"]) == ("agentcore.RunState", 1)
    assert value["digest"] == "sha256:" + hashlib.sha256(body_of(paused_state())).hexdigest()


def test_pending_approvals_and_answers() -> None:
    state = paused_state(children=1)
    assert state.pending_approvals == (
        PendingApproval(("root/0001",), "c2", "write", '{"path": "a.txt"}', "ask a human"),
        PendingApproval(("root/0001", "w/0002"), "c2", "write", '{"path": "a.txt"}',
                        "ask a human"),
    )
    with pytest.raises(RunStateError) as info:
        state.approve("c2")
    assert str(info.value) == (
        "2 deferred calls have id 'c2': give the path of the run that made it"
    )
    state.approve("c2", path=("root/0001", "w/0002"), by="alice")
    state.deny("c2", "not now", by="bob", path=("root/0001",))
    assert len(state.pending_approvals) == 0
    assert state.pending[1] == PendingCall(CALL, CallStatus.denied, "not now", "bob")
    assert state.children[0].pending[1] == PendingCall(CALL, CallStatus.approved, "approved",
                                                       "alice")
    state.approve("c2", path=("root/0001",), reason="changed my mind")
    assert state.pending[1].status is CallStatus.approved
    with pytest.raises(RunStateError) as info:
        state.approve("c9")
    assert str(info.value) == "no deferred call with id 'c9'; waiting for an answer: none"
    with pytest.raises(RunStateError, match="no deferred call with id 'c1'"):
        state.approve("c1")  # done before the pause: not answerable


def test_unknown_id_lists_the_waiting_ones() -> None:
    with pytest.raises(RunStateError) as info:
        paused_state().deny("c1", "no")
    assert str(info.value) == "no deferred call with id 'c1'; waiting for an answer: 'c2'"


def test_a_state_that_is_not_paused_has_nothing_to_answer() -> None:
    state = RunState.begin([Message("user", "go")])
    assert state.pending_approvals == ()
    with pytest.raises(RunStateError) as info:
        state.approve("c1")
    assert str(info.value) == "this RunState is not paused: it has no call to answer"


def test_children_match_the_delegated_calls() -> None:
    state = paused_state(children=1)
    state.pending.pop()
    with pytest.raises(RunStateError) as info:
        RunState.from_json(state.to_json())
    assert str(info.value) == "not a RunState: bad state: 0 delegated calls but 1 children states"


def test_a_running_state_cannot_be_stored() -> None:
    state = paused_state(children=1)
    state.children[0].phase = Phase.running
    with pytest.raises(RunStateError) as info:
        state.to_json()
    assert str(info.value) == (
        "a running run's state cannot be stored: store it once it has paused or ended"
    )


def test_an_edit_by_hand_is_refused() -> None:
    text = paused_state().to_json()
    edited = text.replace('"name":"write"', '"name":"wrote"')
    assert edited != text
    with pytest.raises(RunStateError) as info:
        RunState.from_json(edited)
    assert str(info.value) == (
        "RunState does not match its digest: it was changed after it was written "
        "(edited by hand or damaged); refusing to resume it"
    )
    # Whitespace counts too: the digest is of the bytes as written.
    with pytest.raises(RunStateError, match="does not match its digest"):
        RunState.from_json(text.replace('"turn":1', '"turn": 1'))


def test_an_unknown_version_or_format_is_refused() -> None:
    body = body_of(paused_state())
    with pytest.raises(RunStateError) as info:
        RunState.from_json(envelope(body, version=3))
    assert str(info.value) == (
        "RunState written by an incompatible version (format version 3; "
        "this agentcore reads versions 1 and 2)"
    )
    with pytest.raises(RunStateError) as info:
        RunState.from_json('{"format": "other", "version": 1}')
    assert str(info.value) == "not a RunState: its format is 'other', not 'agentcore.RunState'"


@pytest.mark.parametrize(("text", "message"), [
    ("", "not a RunState: the text is not a JSON object with a format and a version: "
         "Input data was truncated"),
    ("[]", "not a RunState: the text is not a JSON object with a format and a version: "
           "Expected `object`, got `array`"),
    ('{"format": "agentcore.RunState", "version": "1"}',
     "not a RunState: the text is not a JSON object with a format and a version: "
     "Expected `int`, got `str` - at `$.version`"),
    ('{"format": "agentcore.RunState", "version": 1, "digest": "x"}',
     "not a RunState: bad envelope: Object missing required field `state`"),
    ("\xff", "not a RunState: the text is not a JSON object with a format and a version: "
             "JSON is malformed: invalid character (byte 0)"),
])
def test_malformed_text_is_refused(text: str, message: str) -> None:
    with pytest.raises(RunStateError) as info:
        RunState.from_json(text)
    assert str(info.value) == message


@pytest.mark.parametrize(("edit", "message"), [
    (lambda b: b.replace(b'"role":"user"', b'"role":"admin"'),
     "not a RunState: bad state: Invalid enum value 'admin' - at `$.messages[1].role`"),
    (lambda b: b.replace(b'"turn":1', b'"turn":-1'),
     "not a RunState: bad state: Expected `int` >= 0 - at `$.turn`"),
    (lambda b: b.replace(b'"turn":1', b'"turn":1,"extra":2'),
     "not a RunState: bad state: Object contains unknown field `extra`"),
    (lambda b: b.replace(b'"status":"deferred"', b'"status":"maybe"'),
     "not a RunState: bad state: Invalid enum value 'maybe' - at `$.pending[1].status`"),
    (lambda b: b.replace(b'"cache_read_tokens":3', b'"cache_read_tokens":30', 1),
     "not a RunState: bad state: Usage's cache_read_tokens and cache_write_tokens are parts "
     "of its input_tokens, so cannot add up to more (30 + 0 > 10)"),
    (lambda b: b.replace(b'"turn":1', b'"turn":' + b"9" * 5000),
     "not a RunState: bad state: Integer value out of range - at `$.turn`"),
    (lambda b: b.replace(b'"end_reason":"paused"', b'"end_reason":"stop"'),
     "not a RunState: bad state: pending tool calls in a state that is not paused"),
    (lambda b: b.replace(b'"elapsed":2.5', b'"elapsed":1e999'),
     "not a RunState: bad state: Number out of range - at `$.elapsed`"),
    (lambda b: b.replace(b'"elapsed":2.5', b'"elapsed":1e13'),
     "not a RunState: bad state: Expected `float` <= 1000000000000.0 - at `$.elapsed`"),
])
def test_a_state_that_does_not_fit_the_schema_is_refused(edit: object, message: str) -> None:
    body = body_of(paused_state())
    edited = edit(body)  # type: ignore[operator]
    assert edited != body
    with pytest.raises(RunStateError) as info:
        RunState.from_json(envelope(edited))
    assert str(info.value) == message


def test_size_cap() -> None:
    text = paused_state().to_json()
    assert RunState.from_json(text, max_bytes=len(text)).run_id == "r1"
    for value in (text, text.encode()):
        with pytest.raises(RunStateError) as info:
            RunState.from_json(value, max_bytes=len(text) - 1)
        assert str(info.value) == f"RunState JSON too large (more than {len(text) - 1} bytes)"
    with pytest.raises(TypeError):
        RunState.from_json(1)  # type: ignore[arg-type]


TOO_DEEP = (
    f"RunState nested too deeply (more than {MAX_STATE_DEPTH} levels of children, "
    "or JSON nested past the decoder's limit)"
)


def test_children_nested_past_the_bound_are_refused() -> None:
    root = paused_state()
    node = root
    for _ in range(MAX_STATE_DEPTH - 1):
        child = paused_state()
        node.children.append(child)
        node.pending.append(PendingCall(ToolCall("d", "subagent"), CallStatus.delegated))
        node = child
    assert len(fields(RunState.from_json(root.to_json()))) == 17
    node.children.append(paused_state())
    node.pending.append(PendingCall(ToolCall("d", "subagent"), CallStatus.delegated))
    with pytest.raises(RunStateError) as info:
        RunState.from_json(root.to_json())
    assert str(info.value) == TOO_DEEP


@pytest.mark.parametrize("where", ["head", "children", "field"])
def test_deep_json_anywhere_is_a_clean_error(where: str) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    body = body_of(paused_state())
    if where == "head":
        text = '{"x": ' + deep.decode() + ', "format": "agentcore.RunState", "version": 1}'
    elif where == "children":
        text = envelope(body.replace(b'"children":[]', b'"children":[' + deep + b"]"))
    else:
        text = envelope(body.replace(b'"turn":1', b'"turn":1,"x":' + deep))
    with pytest.raises(RunStateError) as info:
        RunState.from_json(text)
    assert str(info.value) == TOO_DEEP


def test_an_id_at_another_path_names_the_path() -> None:
    # It said "no deferred call with id 'c2'; waiting for an answer: 'c2'": the id was
    # right, the path given was not, and the message did not say which.
    with pytest.raises(RunStateError) as info:
        paused_state().approve("c2", path=("other/0001",))
    assert str(info.value) == (
        "no deferred call with id 'c2' in run 'other/0001'; waiting for an answer: 'c2'")
