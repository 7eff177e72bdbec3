"""W4: peak RSS under backpressure, measured in a fresh subprocess per case.

``python -m bench._memory {pool|bare} RUNS EVENTS`` prints the peak RSS in KiB:
the process's own high-water mark (``VmHWM`` on Linux). ``ru_maxrss`` is no use
here: on Linux it keeps the parent's peak across fork and exec, so every child
of a large parent would report the parent's size.
The consumer sleeps 1 ms (virtual, autojump clock) per event, far slower than the
producers, so every producer spends its life blocked on a full buffer.
"""

from __future__ import annotations

import resource
import subprocess
import sys

import trio
import trio.testing

import subagent
from agentcore import DeltaSink, Message, ModelRequest, ModelResponse

CONSUMER_DELAY = 0.001


class DeltaModel:
    """A streaming model that emits ``deltas`` one-character deltas, then answers."""

    def __init__(self, deltas: int) -> None:
        self.deltas = deltas

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(Message("assistant", "done"))

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse:
        for _ in range(self.deltas):
            await on_delta("x")
        return ModelResponse(Message("assistant", "done"))


# agent_start turn_start model_request model_response agent_end + queued started finished
FIXED_EVENTS = 8


async def pool_case(runs: int, events: int) -> None:
    stream: subagent.Stream = subagent.Stream(64)

    async def consume() -> None:
        async for _ in stream:
            await trio.sleep(CONSUMER_DELAY)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        model = DeltaModel(events - FIXED_EVENTS)
        async with subagent.open_pool(
            max_queued=runs, events=stream, defaults=subagent.Defaults(model=model)
        ) as pool:
            pool.register(subagent.Spec("talker", idle_timeout=None))
            for i in range(runs):
                await pool.submit("talker", f"task {i}")
        stream.close()


async def bare_case(runs: int, events: int) -> None:
    send, receive = trio.open_memory_channel[tuple[str, int, str]](64)
    limiter = trio.CapacityLimiter(8)

    async def consume() -> None:
        async for _ in receive:
            await trio.sleep(CONSUMER_DELAY)

    async def one(i: int) -> None:
        async with limiter:
            for _ in range(events):
                await send.send(("delta", i, "x"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with trio.open_nursery() as runners:
            for i in range(runs):
                runners.start_soon(one, i)
        await send.aclose()


def peak_rss_kib(kind: str, runs: int, events: int) -> int:
    """Run one case in a subprocess and return its peak RSS in KiB."""
    out = subprocess.run(
        [sys.executable, "-m", "bench._memory", kind, str(runs), str(events)],
        check=True, capture_output=True, text=True,
    )
    return int(out.stdout.strip())


def own_peak_rss_kib() -> int:
    """This process's peak RSS in KiB."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:  # pragma: no cover - not Linux
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # pragma: no cover


def main() -> None:
    kind, runs, events = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    case = pool_case if kind == "pool" else bare_case
    trio.run(case, runs, events, clock=trio.testing.MockClock(autojump_threshold=0))
    print(own_peak_rss_kib())


if __name__ == "__main__":
    main()
