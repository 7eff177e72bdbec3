"""Timing helpers shared by the workloads."""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable

import attrs
import trio


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


def timed(fn: Callable[[], Awaitable[int]], *, repeat: int = 3) -> Measure:
    """The best of ``repeat`` fresh ``trio.run(fn)`` calls; ``fn`` returns its op count."""
    best: Measure | None = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        count = trio.run(fn)
        elapsed = time.perf_counter() - start
        if best is None or elapsed < best.seconds:
            best = Measure(elapsed, count)
    assert best is not None
    return best
