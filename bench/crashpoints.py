"""The crash-point harness's long profile: ``python -m bench.crashpoints --trees 200
--seed S [--pairs] [--grouped]`` generates that many trees (``tests.durable.shapes.generate``,
seeds S, S+1, ...), crashes each at every durable write (before and after) and
recovers it (``--grouped``: its checkpoint writes grouped into transactions as
production groups them, ``ledger._crashpoints.GROUPED``), and prints the counts of
trees, points, cells, violations and documented windows, then each violation (after
Ctrl-C, those of the trees done). Run from the repository root; forks its children
from this process (see ``tests.durable.crashkit``)."""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

from tests.durable.crashkit import Mode, explore
from tests.durable.shapes import generate


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.crashpoints")
    parser.add_argument("--trees", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pairs", action="store_true",
                        help="also crash every recovery at each of its writes")
    parser.add_argument("--grouped", action="store_true",
                        help="group checkpoint writes as production does")
    args = parser.parse_args(argv)
    start = time.monotonic()
    totals: collections.Counter[str] = collections.Counter()
    violations: list[str] = []
    windows: collections.Counter[str] = collections.Counter()
    try:
        for n in range(args.trees):
            report = explore([generate(args.seed + n)], pairs=args.pairs,
                             mode=Mode(grouped=args.grouped))
            totals.update(trees=1, points=report.points, cells=report.cells,
                          crashed=report.crashed, pairs=report.pairs)
            violations += report.violations
            windows.update(report.windows)
            print(f"tree {args.seed + n}: {report.points} points, "
                  f"{len(report.violations)} violations, "
                  f"{time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    except KeyboardInterrupt:  # Ctrl-C: the counts of the trees done
        print(f"interrupted after {totals['trees']} trees (seeds from {args.seed})")
    times = os.times()
    print(f"trees {totals['trees']}, points {totals['points']}, cells {totals['cells']} "
          f"(crashed {totals['crashed']}), pairs {totals['pairs']}, "
          f"violations {len(violations)}, wall {time.monotonic() - start:.0f} s, "
          f"cpu {times.user + times.system + times.children_user + times.children_system:.0f} s")
    for window, count in sorted(windows.items()):
        print(f"documented window: {window}: {count}")
    for violation in violations:
        print(f"violation: {violation}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
