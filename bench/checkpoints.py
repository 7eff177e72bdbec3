"""The cost of checkpointing (issue 20 item 3): W1 with ``SqliteCheckpoints`` on and off.

Run ``python -m bench.checkpoints [--runs N] [--repeat N] [--fsync]``. W1 (2,000 runs
of a two-turn agent calling a read-only echo, 8 at once, audited to a
``MemorySink``) on the pool as ``python -m bench`` runs it, and the same with
``open_pool(checkpoints=SqliteCheckpoints(file))`` (a fresh file in a temporary
directory per run of the case): each run commits four checkpoints (its start when
queued, two turn boundaries and its end). Also W1 with the echo declared mutating, which adds one
"call in flight" checkpoint per run. Best of N, interleaved. A benchmark, not a
test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import trio

import subagent
from agentcore import FunctionTool
from bench._timing import Body, compare
from bench._workloads import ECHO, Counter, TwoStepModel, echo, w1_pool
from ledger import MemorySink

#: The echo of W1 declared mutating (not read-only): one more checkpoint per run.
MUTATING_ECHO = FunctionTool("echo", "Echo the arguments.", {"type": "object"}, echo)


def w1_checkpointed(runs: int, *, fsync: bool = False, mutating: bool = False) -> Body:
    """W1 on a pool whose tasks are checkpointed to a fresh SQLite file."""

    async def main() -> int:
        stream: subagent.Stream = subagent.Stream(64)
        counter = Counter()
        with tempfile.TemporaryDirectory() as tmp:
            store = subagent.SqliteCheckpoints(Path(tmp) / "ckpt.db", fsync=fsync)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(counter.consume, stream)
                async with subagent.open_pool(
                    max_concurrent=8, max_queued=runs, events=stream, checkpoints=store,
                    defaults=subagent.Defaults(model=TwoStepModel(), audit=MemorySink()),
                ) as pool:
                    pool.register(subagent.Spec(
                        "worker", tools=(MUTATING_ECHO if mutating else ECHO,)))
                    for i in range(runs):
                        await pool.submit("worker", f"task {i}")
                assert pool.statistics().finished == runs
                stream.close()
            await store.aclose()
            assert store.commits == runs * (5 if mutating else 4), store.commits
        return runs

    return main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.checkpoints", description=__doc__)
    parser.add_argument("--runs", type=int, default=2000, help="W1 runs (default 2000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each case, best kept")
    parser.add_argument("--fsync", action="store_true", help="synchronous=FULL")
    args = parser.parse_args(argv)
    n = args.runs
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"W1, {n} runs, best of {args.repeat}, interleaved; load average {load}")
    off, on, mutating = compare(
        w1_pool(n), w1_checkpointed(n, fsync=args.fsync),
        w1_checkpointed(n, fsync=args.fsync, mutating=True), repeat=args.repeat,
    )
    print(f"checkpoints off: {off.per_op_us:.0f} us/run")
    print(f"checkpoints on ({'FULL' if args.fsync else 'NORMAL'}, 4 commits/run): "
          f"{on.per_op_us:.0f} us/run, ratio on/off {on.seconds / off.seconds:.2f}x")
    print(f"checkpoints on, mutating echo (5 commits/run): {mutating.per_op_us:.0f} us/run, "
          f"ratio {mutating.seconds / off.seconds:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
