"""W1 audited to a JsonlSink through its ``record_nowait`` and through ``record()``
alone, beside no audit and a SqliteSink, in one process (issue 35).

Run ``python -m bench.sink_cost [--runs N] [--repeat R]``: medians of R interleaved
fresh ``trio.run`` calls of :func:`bench.audit_cost._w1`, wall and CPU microseconds
per run and their ratios to no audit. The awaited case wraps the sink in an object
that only has ``record()`` (what the recorders awaited before ``record_nowait``).
A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Callable
from typing import Any

from ledger import Entry, JsonlSink, Record, SqliteSink

from ._sinks import files
from .audit_cost import Timing, _w1


class Awaited:
    """A JsonlSink seen through ``record()`` only."""

    def __init__(self, sink: JsonlSink) -> None:
        self._sink = sink

    async def record(self, record: Record) -> Entry:
        return await self._sink.record(record)

    async def aclose(self) -> None:
        await self._sink.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sink_cost")
    parser.add_argument("--runs", type=int, default=1000, help="W1 runs")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each case (median)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        jsonl, db = files(directory, "jsonl"), files(directory, "db")
        cases: dict[str, Callable[[], Any]] = {
            "no audit": lambda: None,
            "JsonlSink, record_nowait": lambda: JsonlSink(jsonl()),
            "JsonlSink, awaited record()": lambda: Awaited(JsonlSink(jsonl())),
            "SqliteSink": lambda: SqliteSink(db()),
        }
        results: dict[str, list[Timing]] = {name: [] for name in cases}
        for _ in range(args.repeat):
            for name, make in cases.items():
                results[name].append(_w1(args.runs, make))
    print(f"W1, {args.runs} runs, medians of {args.repeat} interleaved; load average "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    wall0 = statistics.median(t[0] for t in results["no audit"])
    cpu0 = statistics.median(t[1] for t in results["no audit"])
    for name, timings in results.items():
        wall = statistics.median(t[0] for t in timings)
        cpu = statistics.median(t[1] for t in timings)
        print(f"  {name:<28} wall {wall:8.1f} us/run ({wall / wall0:.2f}x)"
              f"  cpu {cpu:8.1f} us/run ({cpu / cpu0:.2f}x)")


if __name__ == "__main__":
    main()

