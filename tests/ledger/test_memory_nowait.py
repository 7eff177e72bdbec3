"""MemorySink.record_nowait (issue 17): record's checks, order and acknowledged entries,
synchronously, and not a checkpoint; its one-pass check (records kept flat) agrees with
check_content and is_large."""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from ledger import (
    Chain,
    MemorySink,
    Record,
    SinkClosedError,
    SinkStatistics,
    check_chain,
    redact_record,
)
from ledger._encoding import check_content
from ledger._offload import OFFLOAD_CHARS, is_large
from ledger.encoding import GENESIS

from ._helpers import TIME, fixed_clock


async def test_record_nowait_and_record_make_one_chain_in_call_order() -> None:
    sink = MemorySink(clock=fixed_clock)
    sink.record_nowait(Record("prompt", "r1", ("a/0001",), "jess", arguments="hi"))
    await sink.record(Record("model_response", "r1", ("a/0001",), "jess", result="ok"))
    sink.record_nowait(Record("run_end", "r1", ("a/0001",), "jess", data={"turns": 1}))
    first, second, third = sink.entries
    assert [e.kind for e in sink.entries] == ["prompt", "model_response", "run_end"]
    assert (first.seq, first.time, first.prev_hash, first.arguments) == (1, TIME, GENESIS, "hi")
    assert (second.seq, second.prev_hash) == (2, first.hash)
    assert (third.seq, third.prev_hash, dict(third.data)) == (3, second.hash, {"turns": 1})
    assert check_chain(sink.entries).problem is None
    assert sink.statistics() == SinkStatistics(recorded=3, last_seq=3)


async def test_record_nowait_gives_the_entries_record_gives() -> None:
    records = [
        Record("tool_result", "r", ("w/0001",), "a", tool="echo", call_id="c1",
               result="token sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4", duration=0.5),
        Record("gate_decision", "r", ("w/0001",), "a", verdict="allow", reason="fine"),
    ]
    eager, nowait = MemorySink(clock=fixed_clock), MemorySink(clock=fixed_clock)
    for record in records:
        await eager.record(record)
        nowait.record_nowait(record)
    assert nowait.entries == eager.entries
    assert "sk-proj" not in (nowait.entries[0].result or "")


async def test_record_nowait_is_not_a_checkpoint_and_does_not_check_for_cancellation() -> None:
    # The product decision of issue 17: recording into a sink that never blocks need
    # not be a checkpoint. It records even in a cancelled scope (a caller that wants
    # "cancelled records nothing" checks first, as agentcore does).
    sink = MemorySink()
    with trio.CancelScope() as scope:  # noqa: ASYNC100 (nothing in it may checkpoint)
        scope.cancel()
        with trio.testing.assert_no_checkpoints():
            for _ in range(3 * 64):
                sink.record_nowait(Record("prompt"))
    assert not scope.cancelled_caught
    assert sink.statistics().recorded == 3 * 64


async def test_record_nowait_refuses_what_record_refuses_with_the_same_errors() -> None:
    bad: list[Any] = [
        Record(""),
        Record("x", duration=math.inf),
        Record("x", tool=3),  # type: ignore[arg-type]
        Record("x", path=("a", 1)),  # type: ignore[arg-type]
        Record("x", data={"n": 10 ** 5000}),
    ]
    for record in bad:
        with pytest.raises((TypeError, ValueError)) as awaited:
            await MemorySink().record(record)
        with pytest.raises(type(awaited.value)) as direct:
            MemorySink().record_nowait(record)
        assert str(direct.value) == str(awaited.value)
    sink = MemorySink()
    await sink.aclose()
    with pytest.raises(SinkClosedError, match=r"^record\(\) on a closed MemorySink$"):
        sink.record_nowait(Record("prompt"))
    assert sink.statistics() == SinkStatistics(recorded=0, last_seq=0, closed=True)


async def test_a_large_record_would_block_and_records_nothing() -> None:
    sink = MemorySink(clock=fixed_clock)
    large = Record("tool_result", result="x" * (OFFLOAD_CHARS + 1))
    with pytest.raises(trio.WouldBlock):
        sink.record_nowait(large)
    assert sink.statistics().recorded == 0
    await sink.record(large)  # redacted in a worker thread
    sink.record_nowait(Record("run_end"))
    assert [(e.seq, e.kind) for e in sink.entries] == [(1, "tool_result"), (2, "run_end")]
    assert sink.entries[0].result == large.result


class _Str(str):
    pass


_texts = st.one_of(
    st.none(), st.text(max_size=8), st.text(max_size=8).map(_Str), st.integers(), st.just(b"x"),
    st.sampled_from(["", "y" * (OFFLOAD_CHARS // 2 + 1)]),
)
_values = st.one_of(
    st.none(), st.booleans(), st.integers(), st.just(1 << 5000), st.floats(allow_nan=False,
    allow_infinity=False), st.text(max_size=4), st.just("z" * (OFFLOAD_CHARS + 1)),
)


def _refusal(record: Record) -> Exception | None:
    # What recording refuses a record with: check_content's refusal, reported as
    # redacting, then encoding, reports it (as the file sinks do); None if accepted.
    try:
        check_content(record)
    except (TypeError, ValueError) as exc:
        try:
            check_content(redact_record(record))
        except Exception as redacted:
            return redacted
        return exc
    return None


_FIELDS = ["kind", "run_id", "agent_id", "tool", "call_id", "arguments", "verdict",
           "reason", "result", "error", "duration", "path", "data"]


@given(
    fields=st.fixed_dictionaries({
        "kind": st.text(min_size=1, max_size=4), "run_id": st.text(max_size=4),
        "tool": st.one_of(st.none(), st.text(max_size=4)),
        "result": st.sampled_from([None, "", "y" * (OFFLOAD_CHARS // 2 + 1)]),
        "arguments": st.sampled_from([None, "a", "y" * (OFFLOAD_CHARS // 2 + 1)]),
        "duration": st.one_of(st.none(), st.floats(0, 10)),
        "path": st.lists(st.text(max_size=3), max_size=2).map(tuple),
        "data": st.dictionaries(st.text(max_size=3), _values, max_size=3),
    }),
    odd_field=st.sampled_from([None, *_FIELDS]),
    odd=st.one_of(_texts, st.floats(), st.just(1 << 5000)),
)
@pytest.mark.slow
def test_the_one_pass_check_agrees_with_check_content_and_is_large(
    fields: dict[str, Any], odd_field: str | None, odd: Any
) -> None:
    # record_nowait checks a plain record in one pass (and keeps it flat): whatever it
    # accepts, check_content accepts too, and it would block exactly when is_large
    # holds; what check_content refuses it refuses with check_content's error. Each
    # example puts one odd value (a str subclass, bytes, an int, a nan...) in a field.
    if odd_field == "path":
        fields["path"] = (*fields["path"], odd)
    elif odd_field == "data":
        fields["data"] = {**fields["data"], "odd": odd}
    elif odd_field is not None:
        fields[odd_field] = odd
    try:
        record = Record(**fields)
    except (TypeError, ValueError):
        return  # Record itself refuses it (data)
    refused = _refusal(record)
    if refused is not None:
        with pytest.raises(type(refused)) as direct:
            MemorySink().record_nowait(record)
        assert str(direct.value) == str(refused)
        return
    sink = MemorySink(clock=fixed_clock)
    if is_large(record):
        with pytest.raises(trio.WouldBlock):
            sink.record_nowait(record)
        assert sink.statistics().recorded == 0
        return
    sink.record_nowait(record)
    [entry] = sink.entries
    assert entry == Chain().link(redact_record(record), TIME)[0]


_plain_text = st.one_of(st.none(), st.text(max_size=8))


@given(
    kind=st.text(min_size=1, max_size=8), run_id=st.text(max_size=8),
    tool=_plain_text, result=st.one_of(_plain_text, st.just("r" * OFFLOAD_CHARS)),
    verdict=_plain_text, duration=st.one_of(st.none(), st.floats(0, 1e9)),
    path=st.lists(st.text(max_size=3), max_size=3).map(tuple),
    data=st.dictionaries(st.text(max_size=3), st.one_of(
        st.none(), st.booleans(), st.integers(), st.text(max_size=4)), max_size=3),
)
@pytest.mark.slow
def test_plain_records_take_the_fast_path(**fields: Any) -> None:
    # A plain record is kept flat (its fields, its data as a dict of its own or None,
    # its time: items of the sink's pending list, no other object of its own) and
    # rebuilt equal to itself when read.
    record = Record(**fields)
    sink = MemorySink(clock=fixed_clock)
    if is_large(record):
        with pytest.raises(trio.WouldBlock):
            sink.record_nowait(record)
        assert sink.statistics().recorded == 0
        return
    sink.record_nowait(record)
    flat = sink._pending
    data = record.data
    assert flat == [*attrs.astuple(record, recurse=False)[:12], dict(data) or None, TIME]
    assert type(flat[12]) is dict if data else flat[12] is None
    [entry] = sink.entries
    assert entry == Chain().link(redact_record(record), TIME)[0]
