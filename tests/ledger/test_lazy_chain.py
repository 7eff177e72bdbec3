"""MemorySink chains lazily (issue 17): the same records in the same order make the
same chain as chaining each one when it is recorded, and a record that cannot be
encoded is still refused when it is recorded."""

from __future__ import annotations

import datetime
import math
import time

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from ledger import Chain, Entry, MemorySink, Record, check_chain, redact_record
from ledger._clock import utc_from_ns, utc_now
from ledger._encoding import check_content

from ._helpers import Ticking, records


@pytest.mark.slow
@given(st.data())
def test_lazy_chain_is_the_eager_chain(data: st.DataObject) -> None:
    recs = data.draw(st.lists(records, max_size=12))
    reads = data.draw(st.sets(st.integers(0, len(recs))))

    async def main() -> list[Entry]:
        sink = MemorySink(clock=Ticking())
        for i, record in enumerate(recs):
            if i in reads:  # reading in between chains what is pending, and no more
                assert len(sink.entries) == i
            await sink.record(record)
        assert sink.statistics().recorded == sink.statistics().last_seq == len(recs)
        return list(sink.entries)

    lazy = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    clock, chain = Ticking(), Chain()
    eager = [chain.link(redact_record(r), clock())[0] for r in recs]
    assert lazy == eager
    assert [e.hash for e in lazy] == [e.hash for e in eager]
    assert check_chain(lazy).problem is None


async def test_entries_are_kept_and_read_once() -> None:
    sink = MemorySink()
    await sink.record(Record("prompt", arguments="hi"))
    first = sink.entries
    assert sink.entries is first
    assert [e.seq for e in first] == [1]
    await sink.record(Record("run_end"))
    assert sink.entries is first
    assert [e.seq for e in first] == [1, 2]
    assert first[1].prev_hash == first[0].hash
    assert repr(sink) == "<ledger.MemorySink 2 entries open>"


async def test_default_clock_reads_the_time_at_record_time() -> None:
    sink = MemorySink()
    before = utc_now()
    await sink.record(Record("prompt"))
    after = utc_now()
    stamp = time.time_ns()
    while utc_now() == after and time.time_ns() - stamp < 10_000_000:
        pass  # let the clock move on, so that a read-time timestamp would differ
    [entry] = sink.entries
    assert before <= entry.time <= after


BAD = [
    (Record(""), ValueError, "an entry's kind must be a non-empty string"),
    (Record("prompt", duration=math.nan), ValueError,
     "an entry's duration must be finite, not nan"),
    (Record("prompt", duration=math.inf), ValueError,
     "an entry's duration must be finite, not inf"),
    (Record(5), TypeError, "an entry's kind must be a str, not int"),  # type: ignore[arg-type]
    (Record("prompt", run_id=None), TypeError,  # type: ignore[arg-type]
     "an entry's run_id must be a str, not NoneType"),
    (Record("prompt", verdict=b"x"), TypeError,  # type: ignore[arg-type]
     "an entry's verdict must be a str or None, not bytes"),
    (Record("prompt", path=("a", 1)), TypeError,  # type: ignore[arg-type]
     "an entry's path must be a tuple of str"),
    (Record("prompt", duration="1"), TypeError,  # type: ignore[arg-type]
     "an entry's duration must be a float, an int or None, not str"),
]


@pytest.mark.parametrize(("record", "error", "message"), BAD)
async def test_a_record_that_cannot_be_encoded_fails_at_record_time(
    record: Record, error: type[Exception], message: str
) -> None:
    sink = MemorySink()
    await sink.record(Record("prompt"))
    with pytest.raises(error) as caught:
        await sink.record(record)
    assert str(caught.value) == message
    await sink.record(Record("run_end"))
    assert [e.kind for e in sink.entries] == ["prompt", "run_end"]
    assert check_chain(sink.entries).problem is None


async def test_an_int_too_long_to_spell_fails_at_record_time() -> None:
    sink = MemorySink()
    with pytest.raises(ValueError, match="Exceeds the limit"):
        await sink.record(Record("run_end", data={"n": 10**5000}))
    # A duration is refused sooner: past 64 bits (what a SQLite ledger stores).
    with pytest.raises(ValueError, match=r"^an entry's duration must be an int of at most 64"):
        await sink.record(Record("run_end", duration=10**5000))
    await sink.record(Record("run_end", data={"n": 10**1000}))
    assert sink.entries[0].data == {"n": 10**1000}


_ANY = st.none() | st.text(max_size=3) | st.integers() | st.floats() | st.binary(max_size=2)


@given(
    kind=_ANY,
    run_id=_ANY,
    tool=_ANY,
    result=_ANY,
    duration=_ANY,
    path=st.lists(st.text(max_size=2) | st.integers(), max_size=2).map(tuple),
)
def test_check_content_refuses_what_the_encoder_refuses(
    kind: object, run_id: object, tool: object, result: object, duration: object, path: object
) -> None:
    record = Record(
        kind, run_id, path, tool=tool, result=result, duration=duration  # type: ignore[arg-type]
    )
    try:
        Chain().link(record, "t")
    except (TypeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            check_content(record)
    else:
        if duration is None or isinstance(duration, float) or (
            isinstance(duration, int) and -(1 << 63) <= duration < 1 << 63
        ):
            check_content(record)
        elif isinstance(duration, int):  # stricter: what a SQLite ledger cannot store
            with pytest.raises(ValueError):
                check_content(record)
        else:  # stricter than the encoder: a duration no reader takes back
            with pytest.raises(TypeError):
                check_content(record)


@given(st.integers(0, 2**64))
def test_timestamps_from_nanoseconds(ns: int) -> None:
    when = datetime.datetime.fromtimestamp(ns // 1000 / 1e6, datetime.UTC)
    micros = ns // 1000 % 1_000_000
    expected = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{micros:06d}Z"
    if ns < 253402300800 * 10**9:  # datetime stops at year 9999
        assert utc_from_ns(ns) == expected
