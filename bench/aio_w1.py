"""W1 driven from asyncio through ``subagent.aio`` beside W1 driven from trio.

The same workload as :func:`bench._workloads.w1_pool` (2,000 runs, 8 at once, the
two-step model, the echo tool, a MemorySink, a 64-event stream read by a consumer),
with the submits and the consumer on the asyncio side: the pool runs in a trio
guest run on ``asyncio.run``'s loop. Interleaved rounds, best of each::

    python -m bench.aio_w1 [--runs 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import time

import subagent
import subagent.aio
from ledger import MemorySink

from ._timing import Measure, _best, once
from ._workloads import ECHO, W1_ENTRIES, TwoStepModel, w1_pool


def w1_asyncio(runs: int) -> int:
    """One W1 repetition from asyncio (a fresh ``asyncio.run``); returns ``runs``."""

    async def main() -> int:
        events = subagent.aio.Stream(64)
        audit = MemorySink()
        seen = 0

        async def consume() -> None:
            nonlocal seen
            async for _ in events:
                seen += 1

        consumer = asyncio.create_task(consume())
        async with subagent.aio.open_pool(
            max_concurrent=8, max_queued=runs, events=events,
            defaults=subagent.Defaults(model=TwoStepModel(), audit=audit),
        ) as pool:
            pool.register(subagent.Spec("worker", tools=(ECHO,)))
            for i in range(runs):
                await pool.submit("worker", f"task {i}")
        assert pool.statistics().finished == runs
        events.close()
        await consumer
        assert seen >= runs * 6
        assert len(audit.entries) == runs * W1_ENTRIES
        return runs

    return asyncio.run(main())


def once_asyncio(runs: int) -> Measure:
    """Time one repetition of :func:`w1_asyncio`."""
    gc.collect()
    start = time.perf_counter()
    count = w1_asyncio(runs)
    return Measure(time.perf_counter() - start, count)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.aio_w1", description=__doc__)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    from_trio, from_asyncio = _best(
        [functools.partial(once, w1_pool(args.runs, read=True)),
         functools.partial(once_asyncio, args.runs)], args.repeat)
    print(f"W1, {args.runs} runs, best of {args.repeat} interleaved: from trio "
          f"{from_trio.per_op_us:.0f} us/run, from asyncio (subagent.aio, guest mode) "
          f"{from_asyncio.per_op_us:.0f} us/run, asyncio/trio "
          f"{from_asyncio.seconds / from_trio.seconds:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
