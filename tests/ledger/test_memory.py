from __future__ import annotations

import pytest
import trio
import trio.testing

from ledger import MemorySink, Record, SinkClosedError, SinkStatistics, check_chain
from ledger._memory import RECORD_BATCH
from ledger.encoding import GENESIS

from ._helpers import TIME, fixed_clock


async def test_records_are_chained_in_order() -> None:
    # record() returns None since the sink chains on read (issue 17): the entries
    # are read from .entries, with the same assertions as before.
    sink = MemorySink(clock=fixed_clock)
    await sink.record(Record("prompt", "r1", ("a/0001",), "jess", arguments="hi"))
    await sink.record(Record("run_end", "r1", ("a/0001",), "jess", data={"turns": 1}))
    first, second = sink.entries
    assert sink.entries == [first, second]
    assert (first.seq, first.time, first.prev_hash) == (1, TIME, GENESIS)
    assert (second.seq, second.prev_hash) == (2, first.hash)
    assert (second.kind, second.path) == ("run_end", ("a/0001",))
    assert sink.statistics() == SinkStatistics(recorded=2, last_seq=2)
    assert repr(sink) == "<ledger.MemorySink 2 entries open>"


async def test_many_concurrent_tasks_make_one_chain() -> None:
    sink = MemorySink()

    async def writer(task: int) -> None:
        for n in range(50):
            await sink.record(
                Record("tool_request", f"run-{task}", (f"w/{task:04d}",), call_id=str(n))
            )

    async with trio.open_nursery() as nursery:
        for task in range(100):
            nursery.start_soon(writer, task)
    assert len(sink.entries) == 5000
    assert check_chain(sink.entries).problem is None
    for task in range(3):
        mine = [e.call_id for e in sink.entries if e.run_id == f"run-{task}"]
        assert mine == [str(n) for n in range(50)]


async def test_record_checks_for_cancellation_and_cancelled_records_nothing() -> None:
    sink = MemorySink()
    with trio.CancelScope() as scope:
        scope.cancel()
        await sink.record(Record("prompt"))
    assert scope.cancelled_caught
    assert sink.entries == []


async def test_record_yields_once_per_batch() -> None:
    sink = MemorySink()
    other_ran = False

    async def other() -> None:
        nonlocal other_ran
        other_ran = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        for _ in range(RECORD_BATCH - 1):
            await sink.record(Record("prompt"))
        assert not other_ran
        with trio.testing.assert_checkpoints():
            await sink.record(Record("prompt"))
    assert sink.statistics().recorded == RECORD_BATCH


async def test_closed_sink_refuses_records() -> None:
    sink = MemorySink()
    await sink.aclose()
    await sink.aclose()
    with pytest.raises(SinkClosedError, match=r"^record\(\) on a closed MemorySink$"):
        await sink.record(Record("prompt"))
    assert sink.statistics() == SinkStatistics(recorded=0, last_seq=0, closed=True)
    assert repr(sink) == "<ledger.MemorySink 0 entries closed>"
