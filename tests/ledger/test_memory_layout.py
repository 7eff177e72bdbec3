"""MemorySink's pending records (issue 17): every record, plain or held, takes the
same width of the pending list, so that the count of waiting records is its length
over that width. Whatever mix of records and reads, the entries are the chain of the
records in the order they were acknowledged, and the counts are right throughout."""

from __future__ import annotations

from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from ledger import Chain, MemorySink, Record, SinkStatistics
from ledger._offload import OFFLOAD_CHARS

from ._helpers import chain_of, fixed_clock


class _Text(str):
    pass


def _plain(n: int) -> Record:
    return Record("tool_result", f"r{n}", ("a", str(n)), tool="echo", result=f"{n}",
                  duration=0.5, data={"n": n, "ok": True, "who": "me"})


def _held(n: int) -> Record:
    # Not plain (a str subclass): built as a Record and held as it was given.
    return Record("gate_decision", f"r{n}", ("a",), tool=_Text("echo"), verdict="allow")


def _large(n: int) -> Record:
    # Redacted in a worker thread by record(), then held redacted.
    return Record("tool_result", f"r{n}", ("a",), result="x" * (OFFLOAD_CHARS + 1),
                  data={"n": n})


_STEPS = st.lists(st.sampled_from(["fields", "proxy", "nowait", "held", "large", "read"]),
                  max_size=24)


@pytest.mark.slow
@given(_STEPS)
def test_any_mix_of_records_and_reads_gives_their_chain_in_order(steps: list[str]) -> None:
    async def main() -> None:
        sink = MemorySink(clock=fixed_clock)
        records: list[Record] = []
        for n, step in enumerate(steps):
            if step == "read":
                assert sink.entries == chain_of(records)
            elif step in ("fields", "proxy"):
                record = _plain(n)
                data: Any = dict(record.data) if step == "fields" else record.data
                sink.record_fields_nowait(
                    record.kind, record.run_id, record.path, record.agent_id, record.tool,
                    record.call_id, record.arguments, record.verdict, record.reason,
                    record.result, record.error, record.duration, data,
                )
                records.append(record)
            elif step == "nowait":
                records.append(_plain(n))
                sink.record_nowait(records[-1])
            elif step == "held":
                records.append(_held(n))
                sink.record_nowait(records[-1])
            else:
                records.append(_large(n))
                await sink.record(records[-1])
            count = len(records)
            assert sink.statistics() == SinkStatistics(recorded=count, last_seq=count)
            assert repr(sink) == f"<ledger.MemorySink {count} entries open>"
        assert sink.entries == chain_of(records)

    trio.run(main)


def test_read_only_data_is_kept_as_a_dict_of_its_own() -> None:
    # A Record's data (a read-only view) is copied into a dict: not the view, and
    # not whatever its mapping's own copy() would give.
    sink = MemorySink(clock=fixed_clock)
    record = _plain(1)
    assert type(record.data) is MappingProxyType
    sink.record_nowait(record)
    kept = sink._pending[12]
    assert type(kept) is dict and kept == {"n": 1, "ok": True, "who": "me"}
    odd = MappingProxyType(OrderedDict(n=2))  # its mapping's copy() is no dict
    sink.record_fields_nowait("run_end", "r", ("a",), "", None, None, None, None, None,
                              None, None, None, odd)
    assert type(sink._pending[12 + 14]) is dict
    assert sink.entries == chain_of([record, Record("run_end", "r", ("a",), data={"n": 2})])


def test_a_read_that_fails_keeps_the_rest_pending_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Should chaining fail (it cannot, bar a bug), the read raises and every record
    # not chained stays pending, in order, before those recorded since.
    sink = MemorySink(clock=fixed_clock)
    records = [_plain(0), _held(1), _plain(2), _plain(3)]
    for record in records[:3]:
        sink.record_nowait(record)
    link = Chain.link
    calls = 0

    def failing(self: Chain, record: Record, when: str) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("a chaining bug")
        return link(self, record, when)

    monkeypatch.setattr(Chain, "link", failing)
    with pytest.raises(RuntimeError, match="a chaining bug"):
        sink.entries  # noqa: B018
    sink.record_nowait(records[3])
    assert sink.statistics() == SinkStatistics(recorded=4, last_seq=4)
    assert sink.entries == chain_of(records)


@pytest.mark.slow
@given(_STEPS)
def test_a_clock_that_reads_the_entries_neither_duplicates_nor_loses_one(
    steps: list[str],
) -> None:
    # The clock is called while a record is being kept: one that reads the entries
    # (a test's clock numbering them, say) chains the pending records then. The
    # record must still go to the pending list the read left, not to the one it
    # chained (which recording would otherwise put back, so every record before it
    # was chained twice).
    async def main() -> None:
        sink = MemorySink()
        reads: list[int] = []

        def reading_clock() -> str:
            reads.append(len(sink.entries))
            return fixed_clock()

        sink.clock = reading_clock
        records: list[Record] = []
        for n, step in enumerate(steps):
            if step == "read":
                assert sink.entries == chain_of(records)
                continue
            record = _held(n) if step == "held" else _large(n) if step == "large" else _plain(n)
            if step == "large":
                await sink.record(record)
            else:
                sink.record_nowait(record)
            records.append(record)
            assert reads[-1] == len(records) - 1
            count = len(records)
            assert sink.statistics() == SinkStatistics(recorded=count, last_seq=count)
        assert sink.entries == chain_of(records)

    trio.run(main)
