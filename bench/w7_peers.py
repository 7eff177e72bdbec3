# mypy: disable-error-code="import-not-found"
"""W7 on the peers: run by the peers' python (their own venv), not by ours.

``PYTHON bench/w7_peers.py PEER BASE_URL RUNS CONCURRENCY`` runs ``RUNS`` runs of
W7 (``bench/_w7.py``) on ``PEER`` (``openai-agents`` or ``pydantic-ai``), at most
``CONCURRENCY`` at once, against the model server at ``BASE_URL``, and prints one
JSON line: ``us_per_run``, ``events`` (what the consumer took) and ``runs``.

Each peer uses its own OpenAI client (``openai.AsyncOpenAI`` on an httpx (httpx2) pool limited
to the concurrency), streams both model calls, and forwards every stream event it
offers to one consumer through a bounded ``asyncio.Queue(64)``, as ours does with a
``Stream(64)``: the OpenAI Agents SDK through ``Runner.run_streamed`` and its
``stream_events()`` (tracing off), pydantic-ai through ``Agent.run`` with an
``event_stream_handler``. This file imports nothing of the project.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

ANSWER_TEXT = "".join(f"w{i} " for i in range(50))


def _client(base_url: str, concurrency: int) -> Any:
    # openai 3.x is on httpx2 (httpx's successor); older ones on httpx.
    try:
        import httpx2 as httpx
    except ImportError:
        import httpx  # type: ignore[no-redef]
    from openai import AsyncOpenAI

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return AsyncOpenAI(
        base_url=base_url, api_key="bench", max_retries=0,
        http_client=httpx.AsyncClient(limits=limits),
    )


def openai_agents(base_url: str, concurrency: int, put: Callable[[object], Awaitable[None]]) -> Any:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)

    @function_tool
    async def echo(x: int) -> int:
        """Echo the argument."""
        return x

    model = OpenAIChatCompletionsModel(model="bench", openai_client=_client(base_url, concurrency))
    agent = Agent(name="worker", instructions="Answer.", model=model, tools=[echo])

    async def run(text: str) -> str:
        result = Runner.run_streamed(agent, text)
        async for event in result.stream_events():
            await put(event)
        return str(result.final_output)

    return run


def pydantic_ai(base_url: str, concurrency: int, put: Callable[[object], Awaitable[None]]) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(openai_client=_client(base_url, concurrency))
    agent = Agent(OpenAIChatModel("bench", provider=provider), instructions="Answer.")

    @agent.tool_plain
    async def echo(x: int) -> int:
        """Echo the argument."""
        return x

    async def forward(ctx: object, events: Any) -> None:
        async for event in events:
            await put(event)

    async def run(text: str) -> str:
        result = await agent.run(text, event_stream_handler=forward)
        return str(result.output)

    return run


PEERS = {"openai-agents": openai_agents, "pydantic-ai": pydantic_ai}


async def main(peer: str, base_url: str, runs: int, concurrency: int) -> dict[str, object]:
    queue: asyncio.Queue[object] = asyncio.Queue(64)
    seen = 0

    async def consume() -> None:
        nonlocal seen
        while True:
            await queue.get()
            seen += 1
            queue.task_done()

    run = PEERS[peer](base_url, concurrency, queue.put)
    limit = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with limit:
            output = await run(f"task {i}")
        assert output == ANSWER_TEXT, output[:200]

    consumer = asyncio.create_task(consume())
    await asyncio.gather(*(one(i) for i in range(min(runs, concurrency))))  # warm-up
    seen = 0
    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(runs)))
    await queue.join()
    seconds = time.perf_counter() - start
    consumer.cancel()
    return {"peer": peer, "runs": runs, "us_per_run": seconds / runs * 1e6, "events": seen}


if __name__ == "__main__":
    name, url, n, c = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(asyncio.run(main(name, url, n, c))))
