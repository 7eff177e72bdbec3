from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import trio
import trio.testing

import ledger._jsonl
from ledger import JsonlSink, Record, SinkClosedError, SinkError, SinkStatistics, repair, verify
from ledger.encoding import decode_line

from ._helpers import fixed_clock


async def record_many(sink: JsonlSink, tasks: int, each: int) -> None:
    async def writer(task: int) -> None:
        for n in range(each):
            await sink.record(Record("tool_request", f"run-{task}", call_id=str(n)))

    async with trio.open_nursery() as nursery:
        for task in range(tasks):
            nursery.start_soon(writer, task)


async def test_no_io_until_the_first_record(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path, clock=fixed_clock)
    assert not path.exists()
    assert repr(sink) == f"<ledger.JsonlSink {str(path)!r} seq=0 unopened>"
    entry = await sink.record(Record("prompt", arguments="hi"))
    assert decode_line(path.read_bytes()) == entry
    assert repr(sink) == f"<ledger.JsonlSink {str(path)!r} seq=1 open>"
    await sink.aclose()
    assert repr(sink) == f"<ledger.JsonlSink {str(path)!r} seq=1 closed>"


async def test_concurrent_tasks_write_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    await record_many(sink, 100, 50)
    await sink.aclose()
    report = verify(path)
    assert (report.ok, report.entries) == (True, 5000)
    assert sink.statistics() == SinkStatistics(recorded=5000, last_seq=5000, closed=True)
    lines = path.read_bytes().split(b"\n")
    mine = [e.call_id for e in map(decode_line, lines[:-1]) if e.run_id == "run-7"]
    assert mine == [str(n) for n in range(50)]


async def test_fsync_is_shared_by_concurrent_records(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path, fsync=True)
    await sink.record(Record("prompt"))
    await record_many(sink, 100, 1)
    # The 100 concurrent records are written in one group write (issue 17; they
    # were 1 write then 99, with 3 fsyncs) and share one fsync.
    assert sink.statistics() == SinkStatistics(recorded=101, last_seq=101, fsyncs=2)
    await sink.aclose()
    assert verify(path).ok


async def test_reopening_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    first = JsonlSink(path)
    await record_many(first, 1, 3)
    await first.aclose()
    second = JsonlSink(path)
    entry = await second.record(Record("run_end"))
    await second.aclose()
    assert entry.seq == 4
    assert verify(path).entries == 4
    assert verify(path).ok


async def test_reopening_a_torn_file_is_refused_until_repaired(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    await record_many(sink, 1, 2)
    await sink.aclose()
    with path.open("ab") as file:
        file.write(b'{"seq":3,"ti')
    with pytest.raises(SinkError) as info:
        await JsonlSink(path).record(Record("prompt"))
    assert str(info.value) == (
        f"cannot record to ledger {path}: it ends with a torn line (12 bytes after the last"
        f" newline); run `python -m ledger repair {path}` first"
    )
    assert repair(path).ok
    again = JsonlSink(path)
    assert (await again.record(Record("prompt"))).seq == 3
    await again.aclose()


async def test_reopening_after_the_last_entry_was_edited_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    await record_many(sink, 1, 2)
    await sink.aclose()
    path.write_bytes(path.read_bytes().replace(b'"call_id":"1"', b'"call_id":"9"'))
    with pytest.raises(SinkError) as info:
        await JsonlSink(path).record(Record("prompt"))
    assert str(info.value) == (
        f"cannot record to ledger {path}: its last entry (seq 2) does not match its hash;"
        f" run `python -m ledger verify {path}`"
    )


async def test_unopenable_path_raises_a_sink_error(tmp_path: Path) -> None:
    path = tmp_path / "missing-dir" / "audit.jsonl"
    with pytest.raises(SinkError) as info:
        await JsonlSink(path).record(Record("prompt"))
    assert str(info.value) == (
        f"cannot record to ledger {path}: [Errno 2] No such file or directory"
    )
    assert (info.value.path, info.value.cause) == (
        str(path),
        "[Errno 2] No such file or directory",
    )


async def test_dev_full_is_refused_as_a_device() -> None:
    # /dev/full stood for a full disk; it is a device, refused before any write (a
    # real full disk is tests/proof/test_matrix_stores.py's oversized cells).
    sink = JsonlSink("/dev/full")
    with pytest.raises(SinkError) as info:
        await sink.record(Record("prompt"))
    assert str(info.value) == (
        "cannot record to ledger /dev/full: it is a character device, not a regular file")
    assert sink.statistics().last_seq == 0
    await sink.aclose()


async def test_failed_write_loses_nothing_recorded_and_leaves_no_partial_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    recorded = [await sink.record(Record("prompt", call_id=str(n))) for n in range(3)]
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        if len(data) > 40:
            return real_write(fd, data[:40])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ledger._jsonl, "_write", half_then_full)
    with pytest.raises(SinkError, match=r"\[Errno 28\] No space left on device$"):
        await sink.record(Record("tool_request"))
    monkeypatch.setattr(ledger._jsonl, "_write", real_write)
    recorded.append(await sink.record(Record("run_end")))
    await sink.aclose()
    assert [e.seq for e in recorded] == [1, 2, 3, 4]
    assert [decode_line(line) for line in path.read_bytes().splitlines()] == recorded
    assert verify(path).ok


async def test_unremovable_partial_line_breaks_the_sink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    await sink.record(Record("prompt"))
    real_write = os.write

    def cannot_truncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    def ten_then_full(fd: int, data: bytes) -> int:
        if len(data) > 10:
            return real_write(fd, data[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ledger._jsonl, "_write", ten_then_full)
    monkeypatch.setattr(os, "ftruncate", cannot_truncate)
    with pytest.raises(SinkError):
        await sink.record(Record("tool_request"))
    monkeypatch.setattr(ledger._jsonl, "_write", real_write)
    with pytest.raises(SinkError) as info:
        await sink.record(Record("tool_request"))
    assert info.value.cause == (
        "[Errno 28] No space left on device, and a partly written line could not be removed"
        f" ([Errno 5] Input/output error); run `python -m ledger repair {path}`"
    )
    await sink.aclose()
    assert verify(path).problem == "torn last line"


async def test_closed_sink_refuses_records(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    await sink.record(Record("prompt"))
    await sink.aclose()
    await sink.aclose()
    with pytest.raises(SinkClosedError) as info:
        await sink.record(Record("prompt"))
    assert str(info.value) == f"record() on a closed JsonlSink ({path})"


async def test_close_before_open_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path, fsync=True)
    await sink.aclose()
    with pytest.raises(SinkClosedError):
        await sink.record(Record("prompt"))
    assert not path.exists()


async def test_failed_fsync_raises_a_sink_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path, fsync=True)

    def broken_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(ledger._jsonl, "_fsync", broken_fsync)
    with pytest.raises(SinkError) as info:
        await sink.record(Record("prompt"))
    assert str(info.value) == (
        f"cannot record to ledger {path}: fsync failed: [Errno 5] Input/output error"
    )
    monkeypatch.setattr(ledger._jsonl, "_fsync", os.fsync)
    assert (await sink.record(Record("run_end"))).seq == 2
    assert sink.statistics().fsyncs == 1
    await sink.aclose()


async def test_concurrent_records_share_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    await sink.record(Record("prompt"))
    real_write = os.write
    sizes: list[int] = []

    def counted(fd: int, data: bytes) -> int:
        sizes.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(ledger._jsonl, "_write", counted)
    await record_many(sink, 50, 1)
    assert len(sizes) == 1
    await record_many(sink, 1, 3)  # one task: a write per record, as before
    assert len(sizes) == 4
    await sink.aclose()
    report = verify(path)
    assert (report.ok, report.entries) == (True, 54)
    assert sum(sizes) == path.stat().st_size - len(path.read_bytes().splitlines()[0]) - 1


async def test_a_failed_group_write_fails_each_record_and_the_chain_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    first = await sink.record(Record("prompt"))
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        if len(data) > 40:
            return real_write(fd, data[:40])
        raise OSError(errno.ENOSPC, "No space left on device")

    causes: list[str] = []

    async def doomed(n: int) -> None:
        with pytest.raises(SinkError) as info:
            await sink.record(Record("tool_request", call_id=str(n)))
        causes.append(info.value.cause)

    monkeypatch.setattr(ledger._jsonl, "_write", half_then_full)
    async with trio.open_nursery() as nursery:
        for n in range(5):
            nursery.start_soon(doomed, n)
    assert causes == ["[Errno 28] No space left on device"] * 5
    monkeypatch.setattr(ledger._jsonl, "_write", real_write)
    second = await sink.record(Record("run_end"))
    await sink.aclose()
    assert (second.seq, second.prev_hash) == (2, first.hash)
    assert [decode_line(line) for line in path.read_bytes().splitlines()] == [first, second]
    assert verify(path).ok


async def test_a_record_cancelled_while_its_batch_is_written_is_acknowledged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    scope = trio.CancelScope()
    nurseries: list[trio.Nursery] = []
    got: list[int] = []

    async def follower() -> None:
        with scope:
            got.append((await sink.record(Record("tool_request", call_id="b"))).seq)

    def clock() -> str:
        # Called once a record has passed its checks, just before it joins or
        # starts a batch: the leader starts the follower (which runs while the
        # leader yields), and the follower is cancelled from then on.
        name = trio.lowlevel.current_task().name
        if name.endswith("leader"):
            nurseries[0].start_soon(follower)
        elif name.endswith("follower"):
            scope.cancel()
        return fixed_clock()

    sink = JsonlSink(path, clock=clock)
    await sink.record(Record("prompt"))

    async def leader() -> None:
        got.append((await sink.record(Record("tool_request", call_id="a"))).seq)

    async with trio.open_nursery() as nursery:
        nurseries.append(nursery)
        nursery.start_soon(leader)
    assert scope.cancel_called
    assert got == [2, 3]  # written in one batch; the cancelled follower got its entry
    await sink.aclose()
    assert verify(path).entries == 3


async def test_close_writes_the_batch_it_accepted(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    await sink.record(Record("prompt"))
    got: list[int] = []

    async def one() -> None:
        got.append((await sink.record(Record("run_end"))).seq)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one)
        await trio.testing.wait_all_tasks_blocked()
        await sink.aclose()
    assert got == [2]
    assert verify(path).entries == 2
