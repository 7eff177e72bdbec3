"""MemorySink.record_fields_nowait (issue 17): ``record_nowait`` of the record of some
fields, without the record. Whatever the fields, it gives the entry, the error or the
``trio.WouldBlock`` that ``record_nowait(Record(...))`` gives for them."""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from ledger import Chain, MemorySink, Record, SinkClosedError, SinkStatistics, redact_record
from ledger._clock import utc_now
from ledger._offload import OFFLOAD_CHARS

from ._helpers import TIME, chain_of, fixed_clock
from .test_memory_nowait import _refusal, _texts, _values

_ORDER = ("kind", "run_id", "path", "agent_id", "tool", "call_id", "arguments", "verdict",
          "reason", "result", "error", "duration", "data")


def _fields(**given: Any) -> tuple[Any, ...]:
    # The 13 positional fields, Record's defaults for those not given (data: None).
    defaults: dict[str, Any] = {"run_id": "", "path": (), "agent_id": "", "data": None}
    return tuple(given.get(name, defaults.get(name)) for name in _ORDER)


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        call()
    except trio.WouldBlock:
        return ("would block", None)
    except Exception as exc:  # what redacting, then encoding, raises (see _refusal)
        return ("refused", (type(exc), str(exc)))
    return ("recorded", None)


async def test_fields_and_records_make_one_chain_in_call_order() -> None:
    sink = MemorySink(clock=fixed_clock)
    sink.record_fields_nowait(*_fields(kind="prompt", run_id="r", path=("a",), arguments="hi"))
    sink.record_nowait(Record("model_response", "r", ("a",), result="ok"))
    await sink.record(Record("tool_request", "r", ("a",), tool="echo"))
    sink.record_fields_nowait(*_fields(kind="run_end", duration=0.5, data={"turns": 2}))
    assert sink.entries == chain_of([
        Record("prompt", "r", ("a",), arguments="hi"),
        Record("model_response", "r", ("a",), result="ok"),
        Record("tool_request", "r", ("a",), tool="echo"),
        Record("run_end", duration=0.5, data={"turns": 2}),
    ])
    assert sink.statistics() == SinkStatistics(recorded=4, last_seq=4)


async def test_the_data_given_is_copied_and_read_only_in_its_entry() -> None:
    sink = MemorySink(clock=fixed_clock)
    data: dict[str, Any] = {"agent": "w", "turns": 2}
    sink.record_fields_nowait(*_fields(kind="task_end", data=data))
    kept = sink._pending[12]
    assert kept == data and kept is not data and type(kept) is dict  # a copy of it
    data["turns"] = 5
    [entry] = sink.entries
    assert type(entry.data) is MappingProxyType
    assert dict(entry.data) == {"agent": "w", "turns": 2}
    with pytest.raises(TypeError):
        entry.data["turns"] = 3  # type: ignore[index]


async def test_not_a_checkpoint_closed_and_large() -> None:
    sink = MemorySink(clock=fixed_clock)
    with trio.CancelScope() as scope:  # noqa: ASYNC100 (nothing in it may checkpoint)
        scope.cancel()
        with trio.testing.assert_no_checkpoints():
            sink.record_fields_nowait(*_fields(kind="prompt"))
    with pytest.raises(trio.WouldBlock):
        sink.record_fields_nowait(*_fields(kind="tool_result", result="x" * (OFFLOAD_CHARS + 1)))
    with pytest.raises(trio.WouldBlock):
        sink.record_fields_nowait(*_fields(kind="x", data={"big": "x" * (OFFLOAD_CHARS + 1)}))
    assert sink.statistics().recorded == 1
    await sink.aclose()
    with pytest.raises(SinkClosedError, match=r"^record\(\) on a closed MemorySink$"):
        sink.record_fields_nowait(*_fields(kind="prompt"))
    assert sink.statistics() == SinkStatistics(recorded=1, last_seq=1, closed=True)


def test_what_record_refuses_is_refused_with_its_errors() -> None:
    # Record's own refusals (data keys and values), then the encoder's: the same
    # type and text as building the Record and recording it.
    cases: list[dict[str, Any]] = [
        {"kind": "x", "data": {1: "a"}},
        {"kind": "x", "data": {"n": math.nan}},
        {"kind": "x", "data": {"b": b"x"}},
        {"kind": "x", "data": {"n": 10 ** 5000}},
        {"kind": ""},
        {"kind": "x", "duration": math.inf},
        {"kind": "x", "tool": 3},
        {"kind": "x", "path": ("a", 1)},
    ]
    for case in cases:
        with pytest.raises((TypeError, ValueError)) as expected:
            record = Record(**{**case, "data": case.get("data") or {}})
            MemorySink().record_nowait(record)
        with pytest.raises(type(expected.value)) as got:
            MemorySink().record_fields_nowait(*_fields(**case))
        assert str(got.value) == str(expected.value)


@given(
    fields=st.fixed_dictionaries({
        "kind": st.text(min_size=1, max_size=4), "run_id": st.text(max_size=4),
        "agent_id": st.text(max_size=4), "tool": st.one_of(st.none(), st.text(max_size=4)),
        "call_id": st.one_of(st.none(), st.text(max_size=4)),
        "result": st.sampled_from([None, "", "y" * (OFFLOAD_CHARS // 2 + 1)]),
        "arguments": st.sampled_from([None, "a", "y" * (OFFLOAD_CHARS // 2 + 1)]),
        "error": st.one_of(st.none(), st.text(max_size=40)),
        "duration": st.one_of(st.none(), st.floats(0, 10)),
        "path": st.lists(st.text(max_size=3), max_size=2).map(tuple),
        "data": st.one_of(st.none(), st.dictionaries(st.text(max_size=3), _values, max_size=3)),
    }),
    odd_field=st.sampled_from([None, "key", *_ORDER]),
    odd=st.one_of(_texts, st.floats(), st.just(1 << 5000), st.lists(st.text(max_size=2))),
    as_proxy=st.booleans(),
)
@pytest.mark.slow
def test_fields_give_what_their_record_gives(
    fields: dict[str, Any], odd_field: str | None, odd: Any, as_proxy: bool
) -> None:
    # One odd value (a str subclass, bytes, an int, a nan, a list...) in a field, a
    # data value or a data key: record_fields_nowait gives the outcome of building the
    # Record of the same fields and record_nowait of it, with the same entry.
    if odd_field == "path":
        fields["path"] = (*fields["path"], odd)
    elif odd_field == "data":
        fields["data"] = {**(fields["data"] or {}), "odd": odd}
    elif odd_field == "key":
        try:
            fields["data"] = {**(fields["data"] or {}), odd: 1}
        except TypeError:
            return  # an unhashable key: no dict holds it
    elif odd_field is not None:
        fields[odd_field] = odd
    data = fields["data"]
    try:
        record = Record(**{**fields, "data": dict(data) if data else {}})
    except (TypeError, ValueError) as exc:
        expected: tuple[str, Any] = ("refused", (type(exc), str(exc)))
    else:
        refused = _refusal(record)
        expected = ("refused", (type(refused), str(refused))) if refused is not None else (
            _outcome(lambda: MemorySink().record_nowait(record))
        )
    if as_proxy and type(data) is dict:
        fields["data"] = MappingProxyType(data)
    sink = MemorySink(clock=fixed_clock)
    got = _outcome(lambda: sink.record_fields_nowait(*_fields(**fields)))
    assert got == expected
    if got[0] == "recorded":
        [entry] = sink.entries
        assert entry == Chain().link(redact_record(record), TIME)[0]
    else:
        assert sink.statistics().recorded == 0


@given(
    kind=st.text(min_size=1, max_size=8), run_id=st.text(max_size=8),
    tool=st.one_of(st.none(), st.text(max_size=8)),
    duration=st.one_of(st.none(), st.floats(0, 1e9)),
    path=st.lists(st.text(max_size=3), max_size=3).map(tuple),
    data=st.dictionaries(st.text(max_size=3), st.one_of(
        st.none(), st.booleans(), st.integers(-(1 << 60), 1 << 60), st.text(max_size=4),
        st.floats(allow_nan=False, allow_infinity=False)), max_size=3),
)
def test_plain_fields_are_kept_flat(**fields: Any) -> None:
    # A recorder's plain fields are kept as items of the pending list (no object of
    # their own but a copy of their data), rebuilt into an entry equal to its record's.
    sink = MemorySink(clock=fixed_clock)
    data = fields["data"]
    sink.record_fields_nowait(*_fields(**{**fields, "data": data or None}))
    assert sink._pending == [*_fields(**fields)[:12], data or None, TIME]
    assert data is not sink._pending[12]
    [entry] = sink.entries
    assert entry == Chain().link(redact_record(Record(**fields)), TIME)[0]


class _Seg(str):
    pass


# A few path objects, given again and again (the sink remembers the last path it
# checked, by identity): tuples of str, a list, and tuples with a str subclass, an
# int or bytes in them.
_PATHS: tuple[Any, ...] = (
    ("a",), ("a", "b"), (), ["a"], ("a", _Seg("s")), ("a", 1), (b"a",), ("a",) * 3,
)


@given(st.lists(st.integers(0, len(_PATHS) - 1), min_size=1, max_size=12))
def test_paths_in_a_row_each_give_what_their_record_gives(picks: list[int]) -> None:
    # Entries of concurrent runs interleave: each one's path gives the entry (or the
    # refusal) its record gives, whichever paths came before it, the same objects
    # included.
    sink = MemorySink(clock=fixed_clock)
    expected: list[Record] = []
    for pick in picks:
        path = _PATHS[pick]
        try:
            record = Record("x", "r", path)
        except (TypeError, ValueError) as exc:
            want: tuple[str, Any] = ("refused", (type(exc), str(exc)))
        else:
            refused = _refusal(record)
            want = ("refused", (type(refused), str(refused))) if refused else ("recorded", None)
        fields = _fields(kind="x", run_id="r", path=path)
        got = _outcome(lambda: sink.record_fields_nowait(*fields))  # noqa: B023 (called here)
        assert got == want
        if got[0] == "recorded":
            expected.append(record)
    assert sink.entries == chain_of(expected)


def test_a_clock_set_later_times_the_entries_after_it() -> None:
    sink = MemorySink()
    assert sink.clock is utc_now
    sink.record_fields_nowait(*_fields(kind="a"))
    sink.clock = fixed_clock
    assert sink.clock is fixed_clock
    sink.record_fields_nowait(*_fields(kind="b"))
    sink.record_nowait(Record("c"))
    sink.clock = lambda: 3  # type: ignore[assignment,return-value]
    with pytest.raises(TypeError, match="a sink's clock must return a str, not int"):
        sink.record_fields_nowait(*_fields(kind="d"))
    sink.clock = utc_now
    sink.record_fields_nowait(*_fields(kind="e"))
    first, second, third, fifth = sink.entries
    assert (second.time, third.time) == (TIME, TIME)
    assert first.time != TIME and fifth.time != TIME
    assert [e.kind for e in sink.entries] == ["a", "b", "c", "e"]
