"""subagent._events.tagged_of: the pool's tagged events, built by plain slot stores,
are the events Event(...) builds (issue 17)."""

from __future__ import annotations

import copy
import pickle
import time
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentcore
from agentcore import EndReason, RunSummary, Usage
from subagent import Event, EventKind
from subagent._events import tagged_of

_FIELDS = [f.name for f in attrs.fields(Event)]


def _fields(event: Event) -> dict[str, Any]:
    return {name: getattr(event, name) for name in _FIELDS}


_usage = st.builds(Usage, input_tokens=st.integers(0, 99), output_tokens=st.integers(0, 99))
_inner = st.builds(
    agentcore.Event, kind=st.sampled_from(agentcore.EventKind), run_id=st.text(max_size=4),
    turn=st.integers(0, 9), text=st.text(max_size=4),
    time=st.floats(min_value=0, max_value=2e9),
)


@given(
    path=st.lists(st.text(max_size=3), max_size=3).map(tuple),
    inner=_inner, call_id=st.one_of(st.none(), st.text(max_size=4)),
)
def test_tagged_of_a_runs_event_is_the_constructors(
    path: tuple[str, ...], inner: agentcore.Event, call_id: str | None
) -> None:
    built = tagged_of(path, inner.kind, inner, call_id)
    expected = Event(path, inner.kind, inner, call_id)
    assert type(built) is Event
    assert _fields(built) == _fields(expected)
    assert built.time == inner.time
    assert built == expected
    assert hash(built) == hash(expected)
    assert repr(built) == repr(expected)
    assert pickle.loads(pickle.dumps(built)) == built
    assert _fields(copy.copy(built)) == _fields(built)
    assert _fields(copy.deepcopy(built)) == _fields(built)


@given(
    path=st.lists(st.text(max_size=3), max_size=3).map(tuple),
    kind=st.sampled_from([EventKind.task_queued, EventKind.task_started,
                          EventKind.task_finished, EventKind.task_cancelled]),
    call_id=st.one_of(st.none(), st.text(max_size=4)),
    summary=st.one_of(st.none(), st.builds(
        RunSummary, end_reason=st.sampled_from(EndReason),
        error=st.one_of(st.none(), st.text(max_size=3)), turns=st.integers(0, 9), usage=_usage)),
    error=st.one_of(st.none(), st.text(max_size=4)),
    tree_usage=st.one_of(st.none(), _usage),
)
def test_tagged_of_a_pool_event_is_the_constructors(
    path: tuple[str, ...], kind: EventKind, call_id: str | None, summary: RunSummary | None,
    error: str | None, tree_usage: Usage | None,
) -> None:
    built = tagged_of(path, kind, None, call_id, summary, error, tree_usage)
    expected = Event(path, kind, None, call_id, summary, error, tree_usage=tree_usage,
                     time=built.time)
    assert type(built) is Event
    assert _fields(built) == _fields(expected)
    assert built == expected
    assert hash(built) == hash(expected)
    assert repr(built) == repr(expected)
    assert pickle.loads(pickle.dumps(built)) == built


def test_tagged_of_is_frozen_and_stamps_a_pool_event_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time, "time", lambda: 1234.5)
    built = tagged_of(("a",), EventKind.task_started, None, None)
    assert built.time == 1234.5
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        built.error = "x"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        del built.error
    assert built.error is None
