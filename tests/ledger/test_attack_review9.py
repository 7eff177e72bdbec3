"""Review 9 (attacker): MemorySink's pending records at one width (1d3fc5b).

A record of more than 64 KiB is checked by ``record_nowait`` (which raises
``trio.WouldBlock``), then redacted in a worker thread and held: the record must be
the one checked. A ``Record`` subclass whose fields read differently the second
time got a record past the checks that its read then refused, and every read after
it raised (the entry stayed pending in front of every later one).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from ledger import MemorySink, Record, SinkStatistics
from ledger._offload import OFFLOAD_CHARS

from ._helpers import chain_of, fixed_clock

_LARGE = "x" * (OFFLOAD_CHARS + 1)
_FIELDS = ("kind", "run_id", "path", "agent_id", "tool", "call_id", "arguments", "verdict",
           "reason", "result", "error", "data")


class _Fickle(Record):
    """A record whose ``duration`` is finite the first time it is read, NaN after."""

    reads = 0

    @property
    def duration(self) -> float:
        type(self).reads += 1
        return 0.5 if type(self).reads == 1 else math.nan


def _fickle() -> Record:
    base = Record("tool_result", "r", ("a",), result=_LARGE)
    fickle: Any = object.__new__(_Fickle)
    for name in _FIELDS:
        Record.__dict__[name].__set__(fickle, getattr(base, name))
    _Fickle.reads = 0
    return fickle  # type: ignore[no-any-return]


async def test_a_large_record_is_held_as_it_was_checked() -> None:
    sink = MemorySink(clock=fixed_clock)
    with pytest.raises(ValueError, match=r"^an entry's duration must be finite, not nan$"):
        await sink.record(_fickle())
    assert sink.statistics() == SinkStatistics(recorded=0, last_seq=0)
    after = Record("prompt", "r", ("a",), arguments="go")
    await sink.record(after)
    assert sink.entries == chain_of([after])


async def test_a_large_record_is_recorded_once_with_its_fields_read_once_more() -> None:
    # An honest large record: the entry is the one of its fields, as before.
    sink = MemorySink(clock=fixed_clock)
    record = Record("tool_result", "r", ("a",), result=_LARGE, duration=0.5, data={"n": 1})
    await sink.record(record)
    assert sink.statistics() == SinkStatistics(recorded=1, last_seq=1)
    assert sink.entries == chain_of([record])


class _Shrinking(str):
    """A kind whose own ``__len__`` says 1 the first time, then 0 (it holds "k")."""

    calls = 0

    def __len__(self) -> int:
        type(self).calls += 1
        return 1 if type(self).calls == 1 else 0


@pytest.mark.parametrize("reads", [0, 1])
def test_a_kind_is_empty_or_not_by_the_str_it_holds(reads: int) -> None:
    # Its emptiness was asked of the kind's own __len__ when it was recorded and
    # again when it was chained: a kind that answered differently was accepted, then
    # refused by the read (ValueError), and every later read raised the same.
    sink = MemorySink(clock=fixed_clock)
    _Shrinking.calls = reads  # 1: its __len__ says 0 from the start
    record = Record(_Shrinking("k"), "r", ("a",))
    sink.record_nowait(record)
    after = Record("prompt", "r", ("a",), arguments="go")
    sink.record_nowait(after)
    assert sink.entries == chain_of([Record("k", "r", ("a",)), after])
    assert type(sink.entries[0].kind) is _Shrinking
