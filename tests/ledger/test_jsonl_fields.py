"""JsonlSink.record_fields_nowait: an entry written straight from a recorder's fields,
byte for byte the line of the Record path, with its checks, errors and chain."""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger._jsonl
from agentcore._fastpath import fields_nowait_of
from ledger import Entry, JsonlSink, Record, SinkClosedError, SinkError, verify
from ledger.encoding import decode_line

from ._helpers import chain_of, fixed_clock, records


def put(sink: JsonlSink, *fields: Any) -> None:
    """``sink.record_fields_nowait(*fields)``, whose result is None (any field typed)."""
    assert sink.record_fields_nowait(*fields) is None  # type: ignore[func-returns-value]


def fields(r: Record) -> tuple[Any, ...]:
    """``r``'s fields in Record's order, its data as a recorder gives it (a dict or None)."""
    return (
        r.kind, r.run_id, r.path, r.agent_id, r.tool, r.call_id, r.arguments, r.verdict,
        r.reason, r.result, r.error, r.duration, dict(r.data) or None,
    )


SECRETS = [
    Record("prompt", "run-1", ("a",), "agent", arguments="use sk-proj-" + "a" * 40),
    Record("tool_request", "run-1", ("a", "b"), "agent", tool="echo", call_id="c1",
           arguments='{"password": "hunter2", "x": 1}'),
    Record("tool_result", "run-1", ("a",), "agent", tool="echo", call_id="c1",
           result="Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123", duration=1.5e-05),
    Record("gate_decision", "r", ("a",), "g", verdict="deny", reason="token=abc\\u0041def",
           error="\u00e9\u2028\x00\ud800 mysql -pswordfish"),
    Record("model_response", "r", (), "", result="", data={
        "finish_reason": "stop", "input_tokens": 10, "password": 5, "api_key": "sk-x",
        "ratio": 0.1, "ok": True, "none": None, "\u00e9": "\u00fc",
    }),
]


async def pair(tmp_path: Path) -> tuple[JsonlSink, JsonlSink]:
    """Two open sinks with a fixed clock: one for each path."""
    a = JsonlSink(tmp_path / "records.jsonl", clock=fixed_clock)
    b = JsonlSink(tmp_path / "fields.jsonl", clock=fixed_clock)
    for sink in (a, b):
        await sink.record(Record("first"))
    return a, b


async def test_the_line_is_the_record_paths_byte_for_byte(tmp_path: Path) -> None:
    a, b = await pair(tmp_path)
    for record in SECRETS:
        a.record_nowait(record)
        put(b, *fields(record))
    await a.aclose()
    await b.aclose()
    written = (tmp_path / "fields.jsonl").read_bytes()
    assert written == (tmp_path / "records.jsonl").read_bytes()
    assert b"hunter2" not in written and b"abcdefghijklmnopqrstuvwxyz0123" not in written
    assert [decode_line(line) for line in written.splitlines()] == chain_of(
        [Record("first"), *(ledger.redact_record(r) for r in SECRETS)]
    )
    assert b.statistics().recorded == b.statistics().last_seq == 6
    assert verify(tmp_path / "fields.jsonl").ok


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(records, min_size=1, max_size=4))
def test_any_record_gives_the_same_line_either_way(tmp_path: Path, batch: list[Record]) -> None:
    directory = tmp_path / str(len(list(tmp_path.iterdir())))
    directory.mkdir()

    async def main() -> None:
        a, b = await pair(directory)
        for record in batch:
            a.record_nowait(record)
            put(b, *fields(record))
        await a.aclose()
        await b.aclose()
        assert (directory / "fields.jsonl").read_bytes() == (
            directory / "records.jsonl").read_bytes()

    trio.run(main)


async def test_records_that_are_not_plain_take_the_record_path(tmp_path: Path) -> None:
    class Text(str):
        def lower(self) -> str:  # would hide the key from a redactor calling it
            return "nothing"

    a, b = await pair(tmp_path)
    odd: list[tuple[Any, ...]] = [
        ("tool_result", "r", ["a", "b"], "g", None, None, None, None, None, None, None, 3, None),
        ("prompt", "r", ("a",), "g", None, None, Text("sk-proj-" + "b" * 40), None, None,
         None, None, None, {"n": 1 << 5000 >> 4990}),
    ]
    for item in odd:
        put(b, *item)
        data: Mapping[str, Any] = item[12] or {}
        make: Any = Record
        a.record_nowait(make(*item[:12], data))
    await a.aclose()
    await b.aclose()
    written = (tmp_path / "fields.jsonl").read_bytes()
    assert written == (tmp_path / "records.jsonl").read_bytes()
    assert b"[REDACTED]" in written and b'"duration":3,' in written


async def test_refused_fields_raise_what_record_raises(tmp_path: Path) -> None:
    _, sink = await pair(tmp_path)
    with pytest.raises(ValueError, match=r"^an entry's kind must be a non-empty string$"):
        put(sink, "", "r", (), "g", *[None] * 8, None)
    with pytest.raises(TypeError, match=r"^entry data value for 'x' must be str, int"):
        put(sink, "k", "r", (), "g", *[None] * 8, {"x": [1]})
    with pytest.raises(ValueError, match=r"^an entry's duration must be finite, not nan$"):
        put(sink, "k", "r", (), "g", *[None] * 7, float("nan"), None)
    with pytest.raises(TypeError, match=r"^an entry's tool must be a str or None, not int$"):
        put(sink, "k", "r", (), "g", 5, *[None] * 7, None)
    assert sink.statistics().last_seq == 1
    await sink.aclose()
    with pytest.raises(SinkClosedError, match=r"^record\(\) on a closed JsonlSink \("):
        put(sink, "k", "r", (), "g", *[None] * 8, None)
    assert verify(tmp_path / "fields.jsonl").entries == 1


async def test_it_never_yields_nor_checks_for_cancellation(tmp_path: Path) -> None:
    _, sink = await pair(tmp_path)
    with trio.CancelScope() as scope:
        scope.cancel()
        with trio.testing.assert_no_checkpoints():
            for n in range(3):
                put(sink, "tool_result", "r", ("a",), "g", None, str(n),
                                          *[None] * 6, None)
        await trio.lowlevel.checkpoint()
    assert scope.cancelled_caught
    assert sink.statistics().last_seq == 4
    await sink.aclose()
    lines = (tmp_path / "fields.jsonl").read_bytes().splitlines()
    assert [decode_line(line).call_id for line in lines] == [None, "0", "1", "2"]


async def test_what_needs_a_wait_is_left_to_record(tmp_path: Path) -> None:
    plain = ("prompt", "r", ("a",), "g", *[None] * 8, None)
    unopened = JsonlSink(tmp_path / "unopened.jsonl")
    with pytest.raises(trio.WouldBlock):  # opening the file is a worker thread's
        put(unopened, *plain)
    assert not (tmp_path / "unopened.jsonl").exists()
    synced = JsonlSink(tmp_path / "synced.jsonl", fsync=True)
    await synced.record(Record("first"))
    with pytest.raises(trio.WouldBlock):
        put(synced, *plain)
    await synced.aclose()
    _, sink = await pair(tmp_path)
    with pytest.raises(trio.WouldBlock):  # redacted in a worker thread
        put(sink, "tool_result", "r", (), "g", *[None] * 5,
                                  "x" * (64 * 1024 + 1), None, None, None)
    assert sink.statistics().last_seq == 1
    await sink.aclose()


async def test_a_failed_write_is_removed_and_the_chain_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, sink = await pair(tmp_path)
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        if len(data) > 40:
            return real_write(fd, data[:40])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ledger._jsonl, "_write", half_then_full)
    with pytest.raises(SinkError, match=r"\[Errno 28\] No space left on device$"):
        put(sink, "tool_request", "r", (), "g", *[None] * 8, None)
    monkeypatch.setattr(ledger._jsonl, "_write", real_write)
    put(sink, "run_end", "r", (), "g", *[None] * 8, {"turns": 2})
    await sink.aclose()
    assert verify(tmp_path / "fields.jsonl").entries == 2
    assert [decode_line(line) for line in (tmp_path / "fields.jsonl").read_bytes().splitlines()] \
        == chain_of([Record("first"), Record("run_end", "r", (), "g", data={"turns": 2})])
    assert sink.statistics().recorded == 2


async def test_a_removed_file_takes_no_more_entries(tmp_path: Path) -> None:
    _, sink = await pair(tmp_path)
    os.remove(tmp_path / "fields.jsonl")
    plain = ("prompt", "r", ("a",), "g", *[None] * 8, None)
    for _ in range(2):
        with pytest.raises(SinkError, match=r"the file was removed or replaced since"):
            put(sink, *plain)
    assert sink.statistics().last_seq == 1
    await sink.aclose()


async def test_a_subclass_overriding_record_is_not_bypassed(tmp_path: Path) -> None:
    seen: list[str] = []

    class Watched(JsonlSink):
        async def record(self, record: Record) -> Entry:
            seen.append(record.kind)
            return await super().record(record)

    sink = Watched(tmp_path / "audit.jsonl", clock=fixed_clock)
    await sink.record(Record("prompt"))
    assert fields_nowait_of(sink) is None  # the recorders await its record()
    with pytest.raises(trio.WouldBlock):  # and a direct call does not skip it either
        put(sink, "tool_request", "r", (), "g", *[None] * 8, None)
    await sink.aclose()
    assert seen == ["prompt"]
    assert fields_nowait_of(JsonlSink(tmp_path / "x.jsonl")) is not None
