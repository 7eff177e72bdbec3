"""Crash safety: a writer process is killed with SIGKILL at random moments.

Afterwards the ledger verifies (a JSONL ledger may end in a torn line, which
``repair`` removes), every entry whose ``record()`` had returned is present,
and a new sink continues the chain. ``LEDGER_CRASH_RUNS`` sets how many kills
per format (default 3, for CI). The ``jsonl-nowait`` writer acknowledges its
entries through ``JsonlSink.record_nowait``, and the ``jsonl-fields`` one through
``JsonlSink.record_fields_nowait`` (the library's hot path), each followed by a
checkpoint so that the eight writers interleave.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from ledger import JsonlSink, Record, SqliteSink, repair, verify

RUNS = int(os.environ.get("LEDGER_CRASH_RUNS", "3"))

WRITER = """
import sys
import trio
from ledger import JsonlSink, Record, SqliteSink

fmt, path, tasks = sys.argv[1], sys.argv[2], int(sys.argv[3])


async def main():
    sink = SqliteSink(path) if fmt == "sqlite" else JsonlSink(path)

    async def writer(task):
        n = 0
        while True:
            n += 1
            record = Record(
                "tool_result", f"run-{task}", (f"w/{task:04d}",), result="r" * (n % 300)
            )
            if fmt == "jsonl-nowait":
                try:
                    seq = sink.record_nowait(record).seq
                except trio.WouldBlock:
                    seq = (await sink.record(record)).seq
                await trio.lowlevel.checkpoint()
            elif fmt == "jsonl-fields":
                try:
                    r = record
                    sink.record_fields_nowait(
                        r.kind, r.run_id, r.path, r.agent_id, r.tool, r.call_id,
                        r.arguments, r.verdict, r.reason, r.result, r.error, r.duration,
                        {"n": n},
                    )
                    seq = sink.statistics().last_seq  # no checkpoint since the write
                except trio.WouldBlock:
                    seq = (await sink.record(record)).seq
                await trio.lowlevel.checkpoint()
            else:
                seq = (await sink.record(record)).seq
            sys.stdout.write(f"{seq}\\n")
            sys.stdout.flush()

    async with trio.open_nursery() as nursery:
        for task in range(tasks):
            nursery.start_soon(writer, task)


trio.run(main)
"""


def run_and_kill(fmt: str, path: Path, seed: int) -> list[int]:
    """Run a writer, kill it after a random number of records; return the seqs it saw."""
    kill_after = random.Random(seed).randint(1, 400)
    seen: list[int] = []
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, fmt, str(path), "8"], stdout=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                seen.append(int(line))
                if len(seen) >= kill_after:
                    break
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            rest = proc.stdout.read()
    # Lines printed before the kill are complete; a cut-off one is not a seq.
    seen += [int(line) for line in rest.split(b"\n")[:-1]]
    assert proc.returncode == -signal.SIGKILL
    return seen


async def continue_chain(fmt: str, path: Path) -> int:
    sink = SqliteSink(path) if fmt == "sqlite" else JsonlSink(path)
    entry = await sink.record(Record("run_end"))
    await sink.aclose()
    return entry.seq


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(RUNS))
@pytest.mark.parametrize("fmt", ["jsonl", "jsonl-nowait", "jsonl-fields", "sqlite"])
def test_killed_writer_leaves_a_sound_ledger(tmp_path: Path, fmt: str, seed: int) -> None:
    path = tmp_path / f"audit.{fmt}"
    seen = run_and_kill(fmt, path, seed)
    report = verify(path)
    if fmt != "sqlite" and report.problem == "torn last line":
        assert report.first_bad == report.entries + 1
        report = repair(path)
    assert report.ok, report.message
    assert seen
    assert max(seen) <= report.entries  # every returned record is there
    assert len(set(seen)) == len(seen)
    assert trio.run(continue_chain, fmt, path) == report.entries + 1
    assert verify(path).ok
