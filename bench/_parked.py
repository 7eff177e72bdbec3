"""W6: memory per parked run, measured in a fresh subprocess per case (issue 17).

``python -m bench._parked CASE RUNS [--trace] [--top N]`` parks ``RUNS`` runs in their
model call (a model that blocks until cancelled) and prints one JSON line: the
bytes per parked run, as the growth of the process's resident set (``VmRSS``)
and of the memory Python's allocator handed out (``tracemalloc``'s traced
size with ``--trace``, with the 12 largest allocation sites per run, or the
``N`` largest with ``--top N``, which implies ``--trace``), between
the moment before the first submit and the moment every run is parked. Cases:

- ``pool``: ``open_pool(max_concurrent=RUNS)``, no stream, no audit sink, a
  default ``Spec`` (so each run has the default ``idle_timeout``);
- ``pool-stream-sink``: the same with every event to a ``Stream(64)`` that a
  consumer drains, and a ``MemorySink`` (its three entries per run count);
- ``bare``: a nursery of ``RUNS`` trio tasks blocked in the same model call;
- ``http-bare`` and ``http-pool``: the same over real HTTP connections, parked in a
  streamed reply of a local server (:mod:`bench._parked_http`): the connections
  alone, and pool runs in their ``OpenAIChatModel`` call;
- ``http2-bare`` and ``http2-pool``: the same over HTTP/2, 100 streams a connection.

A benchmark, not a test: nothing asserts a size.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
from collections.abc import Awaitable, Callable

import trio
import trio.testing

import subagent
from agentcore import Message, ModelRequest
from ledger import MemorySink

from . import _parked_http
from ._workloads import BlockingModel

CASES = ("pool", "pool-stream-sink", "bare", "http-bare", "http-pool", "http2-bare",
         "http2-pool")
HTTP_CASES = ("http-bare", "http-pool")
HTTP2_CASES = ("http2-bare", "http2-pool")


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


class _Meter:
    """The two readings around the parking: RSS, and tracemalloc's when tracing."""

    def __init__(self, trace: bool, top: int = 12) -> None:
        self.trace = trace
        self.top_sites = top
        self.before: tuple[int, int] = (0, 0)
        self.after: tuple[int, int] = (0, 0)
        self.snapshot: tracemalloc.Snapshot | None = None
        self.top: list[tuple[str, float]] = []

    def _read(self) -> tuple[int, int]:
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] if self.trace else 0
        return _rss_bytes(), traced

    def start(self) -> None:
        self.before = self._read()
        if self.trace:
            self.snapshot = tracemalloc.take_snapshot()

    def stop(self, runs: int) -> None:
        self.after = self._read()
        if self.snapshot is not None:
            diff = tracemalloc.take_snapshot().compare_to(self.snapshot, "lineno")
            sites = diff[: self.top_sites]
            self.top = [(str(stat.traceback[0]), stat.size_diff / runs) for stat in sites]


async def _pool(runs: int, meter: _Meter, *, observed: bool) -> None:
    stream: subagent.Stream | None = subagent.Stream(64) if observed else None
    async with trio.open_nursery() as nursery:
        if stream is not None:
            nursery.start_soon(_drain, stream)
        async with subagent.open_pool(
            max_concurrent=runs, max_queued=runs, events=stream,
            defaults=subagent.Defaults(
                model=BlockingModel(), audit=MemorySink() if observed else None
            ),
        ) as pool:
            pool.register(subagent.Spec("parked"))
            await trio.testing.wait_all_tasks_blocked()
            meter.start()
            for i in range(runs):
                await pool.submit("parked", f"task {i}")
            await trio.testing.wait_all_tasks_blocked()
            assert pool.statistics().running == runs
            meter.stop(runs)
            pool.cancel()
        if stream is not None:
            stream.close()


async def _drain(stream: subagent.Stream) -> None:
    async for _ in stream:
        pass


async def _bare(runs: int, meter: _Meter) -> None:
    model = BlockingModel()
    request = ModelRequest((Message("user", "x"),))
    async with trio.open_nursery() as nursery:
        await trio.testing.wait_all_tasks_blocked()
        meter.start()
        for _ in range(runs):
            nursery.start_soon(model.complete, request)
        await trio.testing.wait_all_tasks_blocked()
        meter.stop(runs)
        nursery.cancel_scope.cancel()


def measure(case: str, runs: int, *, trace: bool = False, top: int = 12) -> dict[str, object]:
    """Park ``runs`` runs of ``case`` in this process; the figures per run (with
    ``trace``, the ``top`` allocation sites too)."""
    meter = _Meter(trace, top)
    if trace:
        tracemalloc.start()
    extra: dict[str, object] = {}
    if case in HTTP_CASES + HTTP2_CASES:
        extra = _parked_http.measure(case, runs, meter)
    else:
        body: Callable[[], Awaitable[None]]
        if case == "bare":
            body = lambda: _bare(runs, meter)  # noqa: E731
        else:
            body = lambda: _pool(runs, meter, observed=case != "pool")  # noqa: E731
        trio.run(body, clock=trio.testing.MockClock(autojump_threshold=0))
    result: dict[str, object] = {
        "case": case, "runs": runs,
        "rss_bytes_per_run": round((meter.after[0] - meter.before[0]) / runs),
        "rss_bytes_total": meter.after[0] - meter.before[0], **extra,
    }
    if trace:
        result["traced_bytes_per_run"] = round((meter.after[1] - meter.before[1]) / runs)
        result["top"] = [[where, round(size)] for where, size in meter.top]
    return result


def run_case(case: str, runs: int, *, trace: bool = False) -> dict[str, object]:
    """:func:`measure` in a fresh subprocess (so that no case inherits another's heap)."""
    argv = [sys.executable, "-m", "bench._parked", case, str(runs)]
    out = subprocess.run(
        argv + (["--trace"] if trace else []), check=True, capture_output=True, text=True,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def main() -> None:
    case, runs = sys.argv[1], int(sys.argv[2])
    if case not in CASES:
        raise SystemExit(f"case must be one of {', '.join(CASES)}")
    rest = sys.argv[3:]
    top = int(rest[rest.index("--top") + 1]) if "--top" in rest else 12
    trace = "--trace" in rest or "--top" in rest
    try:
        result = measure(case, runs, trace=trace, top=top)
    except _parked_http.TooFewFiles as exc:
        result = {"case": case, "runs": runs, "skipped": str(exc)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
