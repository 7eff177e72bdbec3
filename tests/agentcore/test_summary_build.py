"""A run's end builds its RunSummary with ``agentcore._summary.ended`` (its slots set
directly, issue 17 item 4): the object is the one ``RunSummary(...)`` makes, frozen
alike; and ``RunState.drop_calls`` leaves ``pending`` and ``children`` empty."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore import EndReason, RunSummary, Usage
from agentcore._run._state import RunState
from agentcore._summary import ended

_fields = st.tuples(
    st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6),
    st.builds(Usage, st.integers(0, 10**9), st.integers(0, 10**9)),
    st.sampled_from(EndReason), st.none() | st.text(max_size=20),
    st.floats(0, 1e9, allow_nan=False),
)


@pytest.mark.slow
@given(_fields)
def test_ended_is_the_summary_the_class_makes(values: tuple[object, ...]) -> None:
    made = ended(*values)  # type: ignore[arg-type]
    expected = RunSummary(*values)  # type: ignore[arg-type]
    assert type(made) is RunSummary
    assert made == expected and hash(made) == hash(expected)
    assert attrs.astuple(made, recurse=False) == values
    assert repr(made) == repr(expected)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.turns = 3  # type: ignore[misc]


def test_drop_calls_leaves_pending_and_children_empty() -> None:
    state = RunState([], ())
    state.pending.append(object())  # type: ignore[arg-type]
    state.children.append(RunState([], ()))
    state.drop_calls()
    assert state.pending == [] and state.children == []
    # Each read after it is the same fresh list, as a set one would be.
    state.pending.append(object())  # type: ignore[arg-type]
    assert len(state.pending) == 1
