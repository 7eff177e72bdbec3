"""JsonlSink.record_nowait: the hot path's write, acknowledged without a checkpoint."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import trio
import trio.testing

import ledger._jsonl
from agentcore._audit import record, record_sync
from ledger import Entry, JsonlSink, Record, SinkClosedError, SinkError, verify
from ledger.encoding import decode_line

from ._helpers import chain_of, fixed_clock


async def test_an_acknowledged_entry_is_in_the_file_when_the_call_returns(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path, clock=fixed_clock)
    with pytest.raises(trio.WouldBlock):  # opening the file is a worker thread's
        sink.record_nowait(Record("prompt"))
    assert not path.exists()
    first = await sink.record(Record("prompt", arguments="hi"))
    second = sink.record_nowait(Record("tool_request", tool="echo", arguments="sk-" + "a" * 30))
    assert [decode_line(line) for line in path.read_bytes().splitlines()] == [first, second]
    assert [first, second] == chain_of([
        Record("prompt", arguments="hi"),
        Record("tool_request", tool="echo", arguments="[REDACTED]"),
    ])
    third = await sink.record(Record("run_end"))
    assert third.seq == 3 and third.prev_hash == second.hash
    await sink.aclose()
    assert sink.statistics().recorded == 3
    assert verify(path).ok


async def test_it_never_yields_nor_checks_for_cancellation(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "audit.jsonl", clock=fixed_clock)
    await sink.record(Record("prompt"))
    with trio.CancelScope() as scope:
        scope.cancel()
        with trio.testing.assert_no_checkpoints():
            entries = [sink.record_nowait(Record("tool_result", call_id=str(n))) for n in range(3)]
        await trio.lowlevel.checkpoint()  # the cancel was pending all along
    assert scope.cancelled_caught
    assert [e.seq for e in entries] == [2, 3, 4]
    await sink.aclose()


async def test_what_needs_a_wait_is_left_to_record(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    synced = JsonlSink(path, fsync=True)
    await synced.record(Record("prompt"))
    with pytest.raises(trio.WouldBlock):
        synced.record_nowait(Record("prompt"))
    await synced.aclose()
    sink = JsonlSink(path)
    await sink.record(Record("prompt"))
    with pytest.raises(trio.WouldBlock):  # redacted in a worker thread
        sink.record_nowait(Record("tool_result", result="x" * (64 * 1024 + 1)))
    assert sink.statistics().last_seq == 2
    await sink.aclose()
    assert verify(path).entries == 2


async def test_closed_and_refused_records_raise_as_record_does(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "audit.jsonl")
    await sink.record(Record("prompt"))
    with pytest.raises(ValueError, match=r"^an entry's kind must be a non-empty string$"):
        sink.record_nowait(Record(""))
    await sink.aclose()
    with pytest.raises(SinkClosedError, match=r"^record\(\) on a closed JsonlSink \("):
        sink.record_nowait(Record("prompt"))
    unopened = JsonlSink(tmp_path / "other.jsonl")
    await unopened.aclose()
    with pytest.raises(SinkClosedError):
        unopened.record_nowait(Record("prompt"))
    assert not (tmp_path / "other.jsonl").exists()


async def test_a_failed_write_is_removed_and_the_chain_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    recorded = [await sink.record(Record("prompt"))]
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        if len(data) > 40:
            return real_write(fd, data[:40])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ledger._jsonl, "_write", half_then_full)
    with pytest.raises(SinkError, match=r"\[Errno 28\] No space left on device$"):
        sink.record_nowait(Record("tool_request"))
    monkeypatch.setattr(ledger._jsonl, "_write", real_write)
    recorded.append(sink.record_nowait(Record("run_end")))
    await sink.aclose()
    assert [e.seq for e in recorded] == [1, 2]
    assert [decode_line(line) for line in path.read_bytes().splitlines()] == recorded
    assert sink.statistics().recorded == 2


async def test_a_subclass_overriding_record_has_its_override_called(tmp_path: Path) -> None:
    seen: list[str] = []

    class Watched(JsonlSink):
        async def record(self, record: Record) -> Entry:
            seen.append(record.kind)
            return await super().record(record)

    sink = Watched(tmp_path / "audit.jsonl")
    await sink.record(Record("prompt"))
    with pytest.raises(trio.WouldBlock):
        sink.record_nowait(Record("tool_request"))
    assert not record_sync(sink, Record("tool_request"))  # the recorders then await record()
    await record(sink, Record("tool_request"))
    await sink.aclose()
    assert seen == ["prompt", "tool_request"]
    assert verify(tmp_path / "audit.jsonl").entries == 2
