"""Ledger throughput: entries per second recorded by each stock sink.

Run ``python -m bench.ledger_throughput [--quick]``. Each line records the
same realistic entry (a tool request with JSON arguments, a two-level
AgentPath) from 1 task or from 100 concurrent tasks, into a fresh sink in a
temporary directory, and reports entries/s and microseconds per entry.
Targets: SqliteSink >= 20,000/s with 100 tasks; JsonlSink without fsync
>= 50,000/s. A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable

import trio

from ledger import JsonlSink, MemorySink, Record, SqliteSink, verify

RECORD = Record(
    "tool_request",
    "run-0001",
    ("root/0001", "web/0002"),
    "jess",
    tool="search",
    call_id="call_1",
    arguments='{"query": "trio structured concurrency", "limit": 10}',
)

Sink = MemorySink | JsonlSink | SqliteSink


async def _measure(sink: Sink, tasks: int, total: int) -> float:
    each = total // tasks
    await sink.record(RECORD)  # open files outside the timing

    async def writer() -> None:
        for _ in range(each):
            await sink.record(RECORD)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(tasks):
            nursery.start_soon(writer)
    elapsed = time.perf_counter() - start
    await sink.aclose()
    return each * tasks / elapsed


def _case(
    name: str, make: Callable[[str], Sink], tasks: int, total: int, target: float | None = None
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "audit")
        sink = make(path)
        rate = trio.run(_measure, sink, tasks, total)
        extra = ""
        if isinstance(sink, SqliteSink):
            stats = sink.statistics()
            extra = f"  {stats.recorded / max(stats.transactions, 1):6.1f} entries/txn"
        if not isinstance(sink, MemorySink) and not verify(path).ok:
            extra += "  LEDGER DID NOT VERIFY"
        if target is not None:
            extra += f"  target {target:,.0f}: {'met' if rate >= target else 'MISSED'}"
    label = f"{name} x{tasks}"
    print(f"{label:<28} {rate:>10,.0f} entries/s {1e6 / rate:>8.1f} us/entry{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger_throughput")
    parser.add_argument("--quick", action="store_true", help="fewer entries, for a smoke run")
    args = parser.parse_args()
    n = 5_000 if args.quick else 50_000
    synced = 500 if args.quick else 5_000
    print(f"ledger throughput ({'quick' if args.quick else 'full'}; {n:,} entries a case)")
    _case("MemorySink", lambda p: MemorySink(), 1, n)
    _case("MemorySink", lambda p: MemorySink(), 100, n)
    _case("JsonlSink fsync=False", JsonlSink, 1, n, 50_000)
    _case("JsonlSink fsync=False", JsonlSink, 100, n, 50_000)
    _case("JsonlSink fsync=True", lambda p: JsonlSink(p, fsync=True), 1, synced)
    _case("JsonlSink fsync=True", lambda p: JsonlSink(p, fsync=True), 100, n)
    _case("SqliteSink", SqliteSink, 1, synced * 2)
    _case("SqliteSink", SqliteSink, 100, n, 20_000)
    _case("SqliteSink fsync=True", lambda p: SqliteSink(p, fsync=True), 100, n)


if __name__ == "__main__":
    main()
