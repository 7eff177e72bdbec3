"""The audit's cost: per entry in each sink, and per W1 run (issue 17).

Run ``python -m bench.audit_cost [--repeat N]``. Two parts, each timed in wall
and CPU time (``time.process_time``: the cases are single-threaded, and CPU
time is less disturbed by other loads on a shared machine); medians of N
fresh ``trio.run`` calls, interleaved:

- per entry: the ten entries of a W1 run (task lifecycle, prompt, two model
  responses, tool request, gate decision, tool result, run end) for 2,000
  runs, recorded into a ``MemorySink`` (entries read at the end) and a
  ``JsonlSink`` from 1 task and from 8 tasks (``MemorySink`` also with its
  entries read at the end: it chains on read);
- W1 (2,000 runs) with no sink, with a sink whose ``record()`` does nothing,
  and with a ``MemorySink``: the first difference is what the run loop pays
  for auditing, the second what the sink does.

Each line also gives the garbage collector's young and full collections during
the case (medians): what a sink keeps alive costs collections.

It uses only the public API and :mod:`bench._workloads`, so the same file can
time another checkout's code (run it by path with that checkout's python). A
benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable

import trio

import subagent
from bench._workloads import ECHO, Counter, TwoStepModel
from ledger import JsonlSink, MemorySink, Record

P = ("worker/0001",)


def w1_records(runs: int) -> list[Record]:
    """The entries W1's runs record, as records (in the order one run makes them)."""
    out: list[Record] = []
    for i in range(runs):
        rid = f"worker/{i:04d}"
        tokens = {"input_tokens": 10, "output_tokens": 5}
        out += [
            Record("task_queued", rid, P),
            Record("task_started", rid, P),
            Record("prompt", rid, P, arguments=f"task {i}"),
            Record("model_response", rid, P, result="",
                   data={"finish_reason": "tool_calls", **tokens}),
            Record("tool_request", rid, P, tool="echo", call_id="c1", arguments='{"x": 1}'),
            Record("gate_decision", rid, P, tool="echo", call_id="c1", verdict="allow"),
            Record("tool_result", rid, P, tool="echo", call_id="c1", result='{"x": 1}',
                   duration=1.2e-05),
            Record("model_response", rid, P, result="done",
                   data={"finish_reason": "stop", **tokens}),
            Record("run_end", rid, P, data={"end_reason": "stop", "turns": 2, "tool_calls": 1}),
            Record("task_finished", rid, P, data={"end_reason": "stop"}),
        ]
    return out


class NullSink:
    """A sink that records nothing: what the run loop pays for having a sink."""

    async def record(self, record: Record) -> None:
        return None

    async def aclose(self) -> None:
        return None


Sink = MemorySink | JsonlSink | NullSink


Timing = tuple[float, float, int, int]
"""Wall and CPU microseconds per operation, then the garbage collector's young
(generation 0) and full (generation 2) collections, of one ``trio.run``."""


def _collections() -> tuple[int, int]:
    stats = gc.get_stats()
    return stats[0]["collections"], stats[2]["collections"]


def _timed(fn: Callable[[], Awaitable[int]]) -> Timing:
    """Time one fresh ``trio.run`` (see :data:`Timing`)."""
    gc.collect()
    young, full = _collections()
    wall, cpu = time.perf_counter(), time.process_time()
    count = trio.run(fn)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    young_after, full_after = _collections()
    return wall / count * 1e6, cpu / count * 1e6, young_after - young, full_after - full


def _entries(
    records: list[Record], make: Callable[[str], Sink], tasks: int, *, read: bool = True
) -> Timing:
    with tempfile.TemporaryDirectory() as tmp:
        sink = make(os.path.join(tmp, "audit.jsonl"))
        each = len(records) // tasks

        async def main() -> int:
            async def writer(k: int) -> None:
                for record in records[k * each : (k + 1) * each]:
                    await sink.record(record)

            async with trio.open_nursery() as nursery:
                for k in range(tasks):
                    nursery.start_soon(writer, k)
            if read and isinstance(sink, MemorySink):
                assert len(sink.entries) == each * tasks  # builds the chain
            await sink.aclose()
            return each * tasks

        return _timed(main)


def _w1(runs: int, make: Callable[[], Sink | None]) -> Timing:
    return _timed(w1_body(runs, make))


def w1_body(runs: int, make: Callable[[], Sink | None]) -> Callable[[], Awaitable[int]]:
    """W1's body (``runs`` runs, 8 at once, events through a Stream of 64, audited to
    the sink ``make()`` returns, or not audited for None), for one ``trio.run``."""

    async def main() -> int:
        stream: subagent.Stream = subagent.Stream(64)
        counter = Counter()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(counter.consume, stream)
            async with subagent.open_pool(
                max_concurrent=8, max_queued=runs, events=stream,
                defaults=subagent.Defaults(model=TwoStepModel(), audit=make()),
            ) as pool:
                pool.register(subagent.Spec("worker", tools=(ECHO,)))
                for i in range(runs):
                    await pool.submit("worker", f"task {i}")
            stream.close()
        return runs

    return main


def _report(title: str, unit: str, cases: dict[str, Callable[[], Timing]], repeat: int) -> None:
    runs: dict[str, list[Timing]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, case in cases.items():
            runs[name].append(case())
    print(title)
    for name, values in runs.items():
        wall, cpu, young, full = (statistics.median(v[i] for v in values) for i in range(4))
        print(f"  {name:<34} wall {wall:8.2f}  cpu {cpu:8.2f} {unit}"
              f"  gc young {young:g} full {full:g}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_cost")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each case (median kept)")
    parser.add_argument("--runs", type=int, default=2000, help="W1 runs (and runs of entries)")
    args = parser.parse_args()
    records = w1_records(args.runs)
    print(f"audit cost: medians of {args.repeat} interleaved runs; load average "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    _report("per entry, the ten entries of each of the W1 runs:", "us/entry", {
        "MemorySink x1": lambda: _entries(records, lambda p: MemorySink(), 1, read=False),
        "MemorySink x1, entries read": lambda: _entries(records, lambda p: MemorySink(), 1),
        "JsonlSink x1": lambda: _entries(records, JsonlSink, 1),
        "JsonlSink x8": lambda: _entries(records, JsonlSink, 8),
    }, args.repeat)
    _report(f"W1, {args.runs} runs:", "us/run", {
        "no sink": lambda: _w1(args.runs, lambda: None),
        "a sink that records nothing": lambda: _w1(args.runs, NullSink),
        "MemorySink": lambda: _w1(args.runs, MemorySink),
    }, args.repeat)


if __name__ == "__main__":
    main()
