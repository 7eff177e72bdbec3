"""ledger._record.record_of: the library's recorders build the Record that Record(...)
builds, without its converters (issue 17)."""

from __future__ import annotations

import types
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger import Record
from ledger._record import record_from_fields, record_of

_text = st.one_of(st.none(), st.text(max_size=6))
_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=4),
    st.floats(allow_nan=False, allow_infinity=False),
)


@given(
    kind=st.text(max_size=6), run_id=st.text(max_size=6), agent_id=st.text(max_size=6),
    path=st.one_of(st.lists(st.text(max_size=3), max_size=3),
                   st.lists(st.text(max_size=3), max_size=3).map(tuple)),
    tool=_text, call_id=_text, arguments=_text, verdict=_text, reason=_text, result=_text,
    error=_text, duration=st.one_of(st.none(), st.floats(allow_nan=False)),
    data=st.dictionaries(st.text(max_size=3), _scalar, max_size=4),
)
def test_record_of_equals_record(
    kind: str, run_id: str, agent_id: str, path: Any, data: dict[str, Any], **rest: Any
) -> None:
    built = record_of(kind, run_id, path, agent_id, data=dict(data), **rest)
    expected = Record(kind, run_id, path, agent_id, data=data, **rest)
    assert built == expected
    assert type(built.path) is tuple
    assert isinstance(built.data, types.MappingProxyType)


def test_record_of_takes_data_over_read_only_without_a_copy() -> None:
    data: dict[str, Any] = {"end_reason": "stop", "turns": 2}
    built = record_of("run_end", "r", ("a",), "x", data=data)
    assert built.data == {"end_reason": "stop", "turns": 2}
    with pytest.raises(TypeError):
        built.data["turns"] = 3  # type: ignore[index]
    assert record_of("prompt", "r", ("a",), "x").data is Record("prompt").data
    assert record_of("prompt", "r", ("a",), "x", data={}).data is Record("prompt").data


@pytest.mark.parametrize(
    ("data", "error", "text"),
    [
        ({"x": [1]}, TypeError,
         "entry data value for 'x' must be str, int, float, bool or None, not list"),
        ({"x": float("nan")}, ValueError, "entry data value for 'x' must be finite, not nan"),
        ({1: "x"}, TypeError, "entry data keys must be str, not int"),
    ],
)
def test_record_of_refuses_data_as_record_does(
    data: dict[Any, Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error) as direct:
        record_of("x", "r", (), "a", data=data)
    with pytest.raises(error) as built:
        Record("x", data=data)
    assert str(direct.value) == str(built.value) == text


def test_a_record_of_is_frozen_like_any_record() -> None:
    import attrs

    built = record_of("prompt", "r", ("a",), "x", arguments="hi")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        built.kind = "other"  # type: ignore[misc]
    assert attrs.evolve(built, arguments="bye") == Record("prompt", "r", ("a",), "x",
                                                          arguments="bye")


def test_a_record_of_is_a_record_in_every_way_a_record_is() -> None:
    # record_of fills a writable subclass with Record's slots, then sets its class to
    # Record: what comes out is a Record (type, repr, copy, evolve, frozen, unhashable
    # as any Record holding a mapping is), and no instance of the subclass escapes.
    import copy

    import attrs

    built = record_of("gate_decision", "r", ("a", "b"), "x", tool="t", verdict="allow",
                      data={"n": 1})
    made = Record("gate_decision", "r", ("a", "b"), "x", tool="t", verdict="allow",
                  data={"n": 1})
    assert type(built) is Record
    assert repr(built) == repr(made)
    assert copy.copy(built) == made
    with pytest.raises(TypeError, match=r"^unhashable type: 'mappingproxy'$"):
        hash(built)
    with pytest.raises(TypeError, match=r"^unhashable type: 'mappingproxy'$"):
        hash(made)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        del built.kind
    assert built.kind == "gate_decision"


@given(
    kind=st.text(max_size=6), run_id=st.text(max_size=6), agent_id=st.text(max_size=6),
    path=st.lists(st.text(max_size=3), max_size=3).map(tuple),
    tool=_text, call_id=_text, arguments=_text, verdict=_text, reason=_text, result=_text,
    error=_text, duration=st.one_of(st.none(), st.floats(allow_nan=False)),
    data=st.dictionaries(st.text(max_size=3), _scalar, max_size=4),
)
@pytest.mark.slow
def test_record_from_fields_equals_record(
    kind: str, run_id: str, agent_id: str, path: tuple[str, ...], tool: str | None,
    call_id: str | None, arguments: str | None, verdict: str | None, reason: str | None,
    result: str | None, error: str | None, duration: float | None, data: dict[str, Any],
) -> None:
    # What a MemorySink rebuilds from a pending record's fields (its data, None for none).
    view = types.MappingProxyType(data) if data else None
    built = record_from_fields(kind, run_id, path, agent_id, tool, call_id, arguments, verdict,
                               reason, result, error, duration, view)
    assert type(built) is Record
    assert built == Record(kind, run_id, path, agent_id, tool, call_id, arguments, verdict,
                           reason, result, error, duration, data)
    assert isinstance(built.data, types.MappingProxyType)
    if not data:
        assert built.data is Record("x").data
