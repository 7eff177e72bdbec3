"""W3's CPU-time ratio and profiles (issue 17 item 4: cancel 1,000 in-flight runs).

Run ``python -m bench.w3_profile [MODE] [--runs N] [--repeat N] [--top N]``:

- ``ratio`` (default): ``w3_pool`` and ``w3_bare`` of :mod:`bench._workloads`,
  alternating, each a fresh ``trio.run``; the CPU time (``time.process_time``:
  the cases are single-threaded, and CPU time is the least disturbed by other
  loads) from the cancel until the block exits; prints the median of each
  and the ratio of the medians, and the wall-time ratio beside it.
- ``profile``: one ``w3_pool`` repetition under cProfile, enabled only from the
  cancel to the block's exit; prints the top functions by internal time and by
  cumulative time.
- ``callgrind``: one case (``--case pool|bare``) for callgrind, which counts the
  instructions from the cancel to the block's exit when run as
  ``valgrind --tool=callgrind --zero-before=os_getppid --dump-before=os_getpgrp
  python -m bench.w3_profile callgrind --case pool`` (the first dump,
  ``callgrind.out.PID.1``, holds them; ``callgrind_annotate`` it); instruction
  counts are what to compare on a loaded machine.

The workloads are exactly the bench's (the timer is the only difference). A
benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import statistics
import time

import trio
import trio.testing

from ._workloads import Hooks, w3_bare, w3_pool


def pool_case(runs: int, hooks: Hooks) -> None:
    """``w3_pool`` of the bench, with ``hooks`` around the cancel and the block's exit."""
    gc.collect()
    trio.run(w3_pool(runs, hooks))


def bare_case(runs: int, hooks: Hooks) -> None:
    """``w3_bare`` of the bench, with ``hooks`` around the cancel and the block's exit."""
    gc.collect()
    trio.run(w3_bare(runs, hooks))


CASES = {"pool": pool_case, "bare": bare_case}


class _Clocks:
    def __init__(self) -> None:
        self.cpu = self.wall = 0.0

    def begin(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def end(self) -> None:
        self.cpu = time.process_time() - self.cpu
        self.wall = time.perf_counter() - self.wall


def ratio(runs: int, repeat: int) -> None:
    cpu: dict[str, list[float]] = {"pool": [], "bare": []}
    wall: dict[str, list[float]] = {"pool": [], "bare": []}
    for _ in range(repeat):
        for name, case in CASES.items():
            clocks = _Clocks()
            case(runs, (clocks.begin, clocks.end))
            cpu[name].append(clocks.cpu)
            wall[name].append(clocks.wall)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    wmed = {k: statistics.median(v) for k, v in wall.items()}
    print(f"W3, {runs} runs, median of {repeat} interleaved: CPU pool {med['pool'] * 1e3:.2f} ms, "
          f"bare {med['bare'] * 1e3:.2f} ms, ratio {med['pool'] / med['bare']:.2f}x; "
          f"wall pool {wmed['pool'] * 1e3:.2f} ms, bare {wmed['bare'] * 1e3:.2f} ms, "
          f"ratio {wmed['pool'] / wmed['bare']:.2f}x (target <= 2x)")


def profile(runs: int, top: int) -> None:
    prof = cProfile.Profile()
    pool_case(runs, (prof.enable, prof.disable))
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def callgrind(case: str, runs: int) -> None:
    # Valgrind's client requests are inline-assembly macros, out of reach from Python;
    # callgrind's ``--zero-before`` / ``--dump-before`` options name native functions
    # instead: the counters are zeroed on entering CPython's ``os_getppid`` (called at
    # the cancel) and dumped on entering ``os_getpgrp`` (at the block's exit), two
    # calls neither trio nor CPython makes at run time. The dump holds the cancel and
    # the unwinding only.
    CASES[case](runs, (_getppid, _getpgrp))


def _getppid() -> None:
    os.getppid()


def _getpgrp() -> None:
    os.getpgrp()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w3_profile", description=__doc__)
    parser.add_argument("mode", nargs="?", default="ratio",
                        choices=("ratio", "profile", "callgrind"))
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--case", default="pool", choices=tuple(CASES))
    args = parser.parse_args(argv)
    if args.mode == "ratio":
        ratio(args.runs, args.repeat)
    elif args.mode == "profile":
        profile(args.runs, args.top)
    else:
        callgrind(args.case, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
