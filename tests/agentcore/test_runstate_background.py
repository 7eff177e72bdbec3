"""Background children in a RunState's JSON (issue 20 item 1): version 2 only when a
state has them, exact errors for a bad background entry."""

from __future__ import annotations

import json

import pytest

from agentcore import BackgroundChild, EndReason, RunState, RunStateError, RunSummary, Usage
from agentcore._run._state import Phase
from tests.agentcore.test_runstate import body_of, envelope, paused_state


def ended_child(**mark: str | None) -> RunState:
    state = RunState.begin([], run_id="r2", agent="bg", path=("root/0001", "bg/0002"),
                           input="work")
    state.phase = Phase.ended
    state.summary = RunSummary(1, 0, 0, 0, Usage(), EndReason.stop, None, 1.0)
    values: dict[str, str | None] = {"result": "[subagent result] {}", "output": "out",
                                     "error": None}
    values.update(mark)
    state.background = BackgroundChild("start", "bg", **values)
    return state


def with_children(*kids: RunState) -> RunState:
    state = paused_state()
    state.children.extend(kids)
    return state


def refused(state: RunState) -> str:
    with pytest.raises(RunStateError) as info:
        RunState.from_json(envelope(body_of(state), version=2))
    return str(info.value)


def test_a_state_without_background_children_is_still_version_1() -> None:
    assert json.loads(paused_state(children=1).to_json())["version"] == 1


def test_background_children_round_trip_in_version_2() -> None:
    paused = paused_state()
    paused.background = BackgroundChild("start2", "bg")
    state = with_children(ended_child(), paused)
    text = state.to_json()
    assert json.loads(text)["version"] == 2
    again = RunState.from_json(text)
    assert [c.background for c in again.children] == [
        BackgroundChild("start", "bg", "[subagent result] {}", "out", None),
        BackgroundChild("start2", "bg"),
    ]
    assert again.children[1].pending_approvals[0].call_id == "c2"
    assert again.to_json() == text


def test_a_version_1_state_cannot_have_background_children() -> None:
    body = body_of(with_children(ended_child()))
    with pytest.raises(RunStateError) as info:
        RunState.from_json(envelope(body, version=1))
    assert str(info.value) == (
        "not a RunState: bad state: a version 1 state has no background children"
    )


def test_bad_background_entries_are_refused_with_exact_errors() -> None:
    running = paused_state()
    running.summary = None
    running.pending = []
    running.background = BackgroundChild("start", "bg")
    assert refused(with_children(running)) == (
        "not a RunState: bad state: a background child that has not ended must be paused"
    )
    assert refused(with_children(ended_child(output=None))) == (
        "not a RunState: bad state: an ended background child has exactly one of "
        "output and error"
    )
    assert refused(with_children(ended_child(error="boom"))) == (
        "not a RunState: bad state: an ended background child has exactly one of "
        "output and error"
    )
    half = paused_state()
    half.background = BackgroundChild("start", "bg", None, "out", None)
    assert refused(with_children(half)) == (
        "not a RunState: bad state: a background child with an output or an error "
        "needs its result"
    )
    done = ended_child()
    assert done.summary is not None
    done.summary = RunSummary(1, 0, 0, 0, Usage(), EndReason.paused, None, 1.0)
    assert refused(with_children(done)) == (
        "not a RunState: bad state: an ended background child cannot be paused"
    )
    top = paused_state()
    top.background = BackgroundChild("start", "bg")
    assert refused(top) == (
        "not a RunState: bad state: the top state is marked as a background child"
    )


def test_background_children_come_after_the_delegated_ones() -> None:
    state = paused_state(children=1)
    state.children.insert(0, ended_child())
    assert refused(state) == (
        "not a RunState: bad state: 1 delegated calls but child 0 is a background child "
        "(the delegated calls' states come first)"
    )
    extra = with_children(ended_child(), paused_state())
    assert refused(extra) == "not a RunState: bad state: 0 delegated calls but 2 children states"
