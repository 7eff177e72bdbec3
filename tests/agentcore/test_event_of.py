"""agentcore._events.event_of: a run's events, built by plain slot stores, are the
events Event(...) builds (issue 17)."""

from __future__ import annotations

import copy
import pickle
import time
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore import Event, EventKind, GateDecision, Message, ToolCall, Usage
from agentcore._events import event_of

_FIELDS = [f.name for f in attrs.fields(Event)]


def _fields(event: Event) -> dict[str, Any]:
    return {name: getattr(event, name) for name in _FIELDS}


@given(
    kind=st.sampled_from(EventKind), run_id=st.text(max_size=6),
    agent_id=st.text(max_size=6), turn=st.integers(min_value=0, max_value=10**6),
    text=st.text(max_size=8),
    message=st.one_of(st.none(), st.text(max_size=4).map(
        lambda t: Message(role="assistant", content=t))),
    call=st.one_of(st.none(), st.builds(
        ToolCall, id=st.text(max_size=3), name=st.text(max_size=3),
        arguments=st.just("{}"))),
    decision=st.one_of(st.none(), st.builds(
        GateDecision, allowed=st.booleans(), reason=st.text(max_size=4))),
    is_error=st.booleans(),
    usage=st.one_of(st.none(), st.builds(
        Usage, input_tokens=st.integers(0, 99), output_tokens=st.integers(0, 99))),
    attempt=st.integers(min_value=0, max_value=9),
)
def test_event_of_is_the_event_the_constructor_builds(
    kind: EventKind, run_id: str, agent_id: str, turn: int, **rest: Any
) -> None:
    built = event_of(kind, run_id, agent_id, turn, **rest)
    expected = Event(kind, run_id, agent_id, turn, **rest, time=built.time)
    assert type(built) is Event
    assert _fields(built) == _fields(expected)
    assert built == expected
    assert hash(built) == hash(expected)
    assert repr(built) == repr(expected)
    assert pickle.loads(pickle.dumps(built)) == built
    assert _fields(copy.copy(built)) == _fields(built)
    assert _fields(copy.deepcopy(built)) == _fields(built)
    assert _fields(attrs.evolve(built, turn=turn + 1)) == {**_fields(built), "turn": turn + 1}


def test_event_of_defaults_are_the_constructors() -> None:
    built = event_of(EventKind.turn_start, "r", "a", 2)
    assert _fields(built) == _fields(Event(EventKind.turn_start, "r", "a", 2, time=built.time))


def test_event_of_is_frozen() -> None:
    built = event_of(EventKind.turn_start, "r", "a", 2)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        built.turn = 3  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        del built.turn
    with pytest.raises(AttributeError):
        built.other = 1  # type: ignore[attr-defined]
    assert built.turn == 2


def test_event_of_takes_time_from_the_wall_clock_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: 1234.5)
    assert event_of(EventKind.agent_end, "r", "a", 0).time == 1234.5
    assert Event(EventKind.agent_end).time == 1234.5
