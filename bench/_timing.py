"""Timing helpers: fresh ``trio.run`` calls, interleaved, best of a few repeats."""

from __future__ import annotations

import functools
import gc
import time
from collections.abc import Awaitable, Callable

import attrs
import trio

#: One repetition of a workload; returns its operation count.
Body = Callable[[], Awaitable[int]]
#: One repetition of a latency workload; returns its count and the seconds it measured.
Latency = Callable[[], Awaitable[tuple[int, float]]]


@attrs.frozen
class Measure:
    """One timed run: seconds on the wall clock and the operation count."""

    seconds: float
    count: int

    @property
    def per_op_us(self) -> float:
        return self.seconds / self.count * 1e6

    @property
    def per_second(self) -> float:
        return self.count / self.seconds


def once(body: Body) -> Measure:
    """Time one repetition of ``body`` in a fresh ``trio.run``."""
    gc.collect()
    start = time.perf_counter()
    count = trio.run(body)
    return Measure(time.perf_counter() - start, count)


def once_latency(body: Latency) -> Measure:
    """Run one repetition of a latency body in a fresh ``trio.run``."""
    gc.collect()
    count, seconds = trio.run(body)
    return Measure(seconds, count)


def _best(runs: list[Callable[[], Measure]], repeat: int) -> list[Measure]:
    # Interleaved (a, b, a, b, ...) so that a change of load hits every contender alike.
    best: list[Measure | None] = [None] * len(runs)
    for _ in range(repeat):
        for k, run in enumerate(runs):
            m = run()
            current = best[k]
            if current is None or m.seconds < current.seconds:
                best[k] = m
    return [m for m in best if m is not None]


def compare(*bodies: Body, repeat: int) -> list[Measure]:
    """Time each body ``repeat`` times, interleaved; the best run of each, in order."""
    return _best([functools.partial(once, b) for b in bodies], repeat)


def compare_latency(*bodies: Latency, repeat: int) -> list[Measure]:
    """Like :func:`compare`, for bodies that time themselves."""
    return _best([functools.partial(once_latency, b) for b in bodies], repeat)
