"""Ledger files on disk: repair mends only a torn tail, files are private, one writer."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from ledger import (
    Chain,
    JsonlSink,
    Record,
    SinkClosedError,
    SinkError,
    SqliteSink,
    VerifyError,
    repair,
    verify,
)
from ledger.__main__ import main
from ledger.encoding import encode_entry

from ._helpers import chain_of, jsonl_bytes

ENTRIES = chain_of([Record("prompt"), Record("tool_result", result="ok"), Record("run_end")])
WHOLE = jsonl_bytes(ENTRIES)
SECOND = jsonl_bytes(ENTRIES[1:2])[:-1]
LOCKED = (
    "another sink is writing to it (in this process or another);"
    " a ledger takes one writer at a time"
)


# -- repair ---------------------------------------------------------------------------------


def test_a_whole_last_entry_gets_its_newline_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(WHOLE[:-1])
    report = verify(path)
    size = len(WHOLE) - 1 - WHOLE[:-1].rindex(b"\n") - 1
    assert (report.ok, report.first_bad, report.problem, report.torn_complete) == (
        False,
        3,
        "torn last line",
        True,
    )
    assert report.message == (
        f"{path}: entry 3 is whole but its line lacks the final newline ({size} bytes)"
    )
    assert main(["repair", str(path)]) == 0
    assert capsys.readouterr().out == (
        f"added the missing final newline of entry 3; {path}: 3 entries, chain sound,"
        f" head {ENTRIES[2].hash}\n"
    )
    assert path.read_bytes() == WHOLE


async def test_the_sink_error_tells_the_truth_about_repair(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(WHOLE[:-1])
    with pytest.raises(SinkError, match=r"run `python -m ledger repair .*` first$"):
        await JsonlSink(path).record(Record("prompt"))
    assert repair(path).ok
    sink = JsonlSink(path)
    assert (await sink.record(Record("prompt"))).seq == 4  # nothing recorded was lost
    await sink.aclose()


@pytest.mark.parametrize(
    ("tail", "seq", "problem", "message"),
    [
        pytest.param(
            SECOND,
            4,
            "duplicated",
            "entry 4 is a copy of entry 2",
            id="a copy of an earlier entry",
        ),
        pytest.param(
            SECOND.replace(b'"ok"', b'"ok" '),
            4,
            "not canonical",
            "entry 4 is not canonical: its bytes are not the canonical encoding of its content"
            " (member order, whitespace, escapes or number spelling differ)",
            id="not canonical",
        ),
        pytest.param(
            b"[1, 2]", 4, "malformed", "entry 4 is malformed: not a JSON object", id="json"
        ),
        pytest.param(
            b'{"seq":4,"result":NaN}',
            4,
            "malformed",
            "entry 4 is malformed: it holds NaN, a number no ledger writer produces",
            id="nan",
        ),
        pytest.param(
            b"[" * 100_000,
            4,
            "malformed",
            "entry 4 is malformed: not valid JSON: nested too deeply",
            id="deep",
        ),
    ],
)
def test_a_whole_value_after_the_last_newline_is_not_torn(
    tmp_path: Path, tail: bytes, seq: int, problem: str, message: str
) -> None:
    # A crash leaves a prefix of a line, never a whole JSON value: this was put there.
    path = tmp_path / "audit.jsonl"
    path.write_bytes(WHOLE + tail)
    report = verify(path)
    assert (report.first_bad, report.problem, report.message) == (
        seq,
        problem,
        f"{path}: {message}",
    )
    assert repair(path) == report
    assert path.read_bytes() == WHOLE + tail


@pytest.mark.parametrize("cut", [2, 10, 50])
def test_a_cut_entry_is_removed(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(WHOLE[:-cut])
    assert verify(path).torn_complete is False
    assert repair(path).ok
    assert path.read_bytes() == jsonl_bytes(ENTRIES[:2])


def test_a_character_cut_in_two_is_torn(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(WHOLE + '{"seq":4,"arguments":"é'.encode()[:-1])
    assert verify(path).problem == "torn last line"
    assert repair(path).ok
    assert path.read_bytes() == WHOLE


async def test_repair_refuses_a_ledger_a_sink_is_writing(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    await sink.record(Record("prompt"))
    with path.open("ab") as file:
        file.write(b'{"seq":2')  # as if a write were under way
    with pytest.raises(VerifyError) as info:
        repair(path)
    assert str(info.value) == f"cannot repair ledger {path}: a sink is writing to it"
    await sink.aclose()
    assert repair(path).ok


# -- file modes -----------------------------------------------------------------------------


@pytest.fixture(params=[0o000, 0o022, 0o277], ids=["umask 000", "umask 022", "umask 277"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_jsonl_ledger_is_created_private(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    await sink.record(Record("prompt"))
    assert mode(path) == 0o600
    await sink.aclose()


async def test_sqlite_ledger_and_its_sidecars_are_created_private(
    tmp_path: Path, umask: int
) -> None:
    path = tmp_path / "audit.db"
    sink = SqliteSink(path)
    await sink.record(Record("prompt"))
    sidecars = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-lock")]
    assert all(p.exists() for p in sidecars)
    assert {p.name: mode(p) for p in [path, *sidecars]} == {
        "audit.db": 0o600,
        "audit.db-wal": 0o600,
        "audit.db-shm": 0o600,
        "audit.db-lock": 0o600,
    }
    await sink.aclose()


async def test_an_existing_ledger_keeps_its_mode(tmp_path: Path) -> None:
    # An owner who opened a ledger to a group of auditors keeps that choice.
    path = tmp_path / "audit.jsonl"
    path.write_bytes(WHOLE)
    path.chmod(0o640)
    sink = JsonlSink(path)
    await sink.record(Record("prompt"))
    await sink.aclose()
    assert mode(path) == 0o640


# -- one writer at a time -------------------------------------------------------------------


@pytest.mark.parametrize("kind", [JsonlSink, SqliteSink])
async def test_a_second_sink_in_one_process_is_refused(
    tmp_path: Path, kind: type[JsonlSink] | type[SqliteSink]
) -> None:
    path = tmp_path / "audit.ledger"
    first = kind(path)
    await first.record(Record("prompt"))
    second = kind(path)
    with pytest.raises(SinkError) as info:
        await second.record(Record("prompt"))
    assert str(info.value) == f"cannot record to ledger {path}: {LOCKED}"
    await second.aclose()
    assert (await first.record(Record("run_end"))).seq == 2  # the holder goes on
    await first.aclose()
    third = kind(path)  # released on close
    assert (await third.record(Record("run_end"))).seq == 3
    await third.aclose()
    assert verify(path).entries == 3


HOLDER = """
import sys
import trio
from ledger import JsonlSink, Record, SqliteSink

async def main():
    sink = (JsonlSink if sys.argv[1] == "jsonl" else SqliteSink)(sys.argv[2])
    await sink.record(Record("prompt"))
    print("open", flush=True)
    await trio.sleep_forever()

trio.run(main)
"""


@pytest.mark.parametrize("fmt", ["jsonl", "sqlite"])
async def test_a_second_process_is_refused_until_the_holder_is_killed(
    tmp_path: Path, fmt: str
) -> None:
    path = tmp_path / f"audit.{fmt}"
    holder = await trio.lowlevel.open_process(
        [sys.executable, "-c", HOLDER, fmt, str(path)], stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        said = b""
        while not said.endswith(b"\n"):
            said += await holder.stdout.receive_some()
        assert said == b"open\n"
        sink = (JsonlSink if fmt == "jsonl" else SqliteSink)(path)
        with pytest.raises(SinkError) as info:
            await sink.record(Record("tool_request"))
        assert info.value.cause == LOCKED
        await sink.aclose()
    finally:
        holder.send_signal(signal.SIGKILL)
        await holder.wait()
        if holder.stdout is not None:
            await holder.stdout.aclose()
    assert holder.returncode == -signal.SIGKILL
    sink = (JsonlSink if fmt == "jsonl" else SqliteSink)(path)
    assert (await sink.record(Record("run_end"))).seq == 2
    await sink.aclose()
    assert verify(path).ok


async def test_concurrent_opens_in_one_process_leave_one_writer(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sinks = [JsonlSink(path) for _ in range(8)]
    outcomes: list[str] = []

    async def open_one(sink: JsonlSink) -> None:
        try:
            await sink.record(Record("prompt"))
        except SinkError as exc:
            outcomes.append(exc.cause)
        else:
            outcomes.append("recorded")

    async with trio.open_nursery() as nursery:
        for sink in sinks:
            nursery.start_soon(open_one, sink)
    assert sorted(outcomes) == sorted(["recorded"] + [LOCKED] * 7)
    for sink in sinks:
        await sink.aclose()
    assert verify(path).entries == 1


@pytest.mark.slow
@given(st.sampled_from(["jsonl", "sqlite"]), st.data())
def test_any_open_and_close_order_keeps_one_writer(fmt: str, data: st.DataObject) -> None:
    """Model: a sink opens on its first record unless another open sink holds the
    ledger; a closed sink stays closed; every record that returned is in the ledger."""

    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"audit.{fmt}"
            kind = JsonlSink if fmt == "jsonl" else SqliteSink
            sinks = [kind(path) for _ in range(3)]
            state = ["unopened"] * 3
            recorded = 0
            for _ in range(data.draw(st.integers(1, 12))):
                i = data.draw(st.integers(0, 2))
                if data.draw(st.booleans()):
                    await sinks[i].aclose()
                    state[i] = "closed"
                    continue
                holder = "open" in state and state.index("open") != i
                if state[i] == "closed":
                    with pytest.raises(SinkClosedError):
                        await sinks[i].record(Record("prompt"))
                elif state[i] == "unopened" and holder:
                    with pytest.raises(SinkError) as info:
                        await sinks[i].record(Record("prompt"))
                    assert info.value.cause == LOCKED
                else:
                    entry = await sinks[i].record(Record("prompt"))
                    state[i] = "open"
                    recorded += 1
                    assert entry.seq == recorded
            for sink in sinks:
                await sink.aclose()
            report = verify(path) if recorded else None
            assert report is None or (report.ok, report.entries) == (True, recorded)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# -- bounded memory -------------------------------------------------------------------------


@pytest.mark.slow
def test_verify_and_tail_hold_one_line_at_a_time(tmp_path: Path) -> None:
    # A child process reads a 60 MiB ledger; its peak memory stays below the file's size
    # (it used to hold the file twice over: the bytes and their lines).
    path = tmp_path / "audit.jsonl"
    chain = Chain()
    with path.open("wb") as file:
        for n in range(30_000):
            entry, _ = chain.link(Record("tool_result", call_id=str(n), result="r" * 1800), "T")
            file.write(f"{encode_entry(entry)}\n".encode())
    size = path.stat().st_size
    assert size > 55 * 2**20
    # VmHWM, the peak of this process's own memory (ru_maxrss also counts the parent's
    # at the fork that started it).
    code = (
        "import sys, ledger\n"
        "report = ledger.verify(sys.argv[1])\n"
        "assert (report.ok, report.entries) == (True, 30_000), report\n"
        "assert ledger.tail(sys.argv[1], 2)[-1].seq == 30_000\n"
        "status = open('/proc/self/status').read().split('VmHWM:')[1].split()\n"
        "assert status[1] == 'kB', status\n"
        "print(int(status[0]) * 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    assert int(done.stdout) < size
