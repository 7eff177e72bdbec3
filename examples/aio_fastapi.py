"""A FastAPI endpoint that delegates to a subagent pool and streams the tree's events
as Server-Sent Events: the pool runs on FastAPI's asyncio loop through
``subagent.aio`` (trio guest mode). Fully offline (scripted models):

    pip install fastapi uvicorn
    uvicorn examples.aio_fastapi:app --loop asyncio
    curl -N 'http://127.0.0.1:8000/ask?q=plan+a+trip'

or ``python examples/aio_fastapi.py``, which serves it on a free port of 127.0.0.1,
asks once over HTTP and prints the stream.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

import subagent
import subagent.aio
from agentcore import Message, ModelRequest, ModelResponse
from agentcore.testing import tool_call_reply


class Planner:
    """The lead asks the ``researcher`` subagent, then answers with what it found;
    the researcher answers at once."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        if request.messages[1].content.startswith("research:"):
            return ModelResponse(Message("assistant", f"notes on {last.content[9:]}"))
        if last.role == "tool":
            return ModelResponse(Message("assistant", f"plan, using {last.content}"))
        call = json.dumps({"agent": "researcher", "task": f"research:{last.content}"})
        return ModelResponse(tool_call_reply("subagent", call))


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # The pool lives as long as the app: its runs end before the server stops.
    async with subagent.aio.open_pool(max_concurrent=8,
                                      defaults=subagent.Defaults(model=Planner())) as pool:
        pool.register(subagent.Spec(name="lead", description="plans",
                                    tools=[subagent.SubagentTool(pool.pool)]))
        pool.register(subagent.Spec(name="researcher", description="finds facts"))
        app.state.pool = pool
        yield


app = FastAPI(lifespan=lifespan)


def _sse(kind: str, data: object) -> str:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"


@app.get("/ask")
async def ask(q: str, request: Request) -> StreamingResponse:
    """Run the lead on ``q``; stream each event of its tree, then the answer."""
    pool: subagent.aio.AioPool = request.app.state.pool
    events = subagent.aio.Stream(64)
    task = await pool.submit("lead", q, events=events)

    async def stream() -> AsyncIterator[str]:
        try:
            async for event in events:
                yield _sse("agent", {"path": list(event.path), "kind": str(event.kind)})
                if event.path == task.path and str(event.kind) == "task_finished":
                    break
            yield _sse("answer", (await task.wait()).output)
        finally:
            # A client gone away: stop its tree and release its senders.
            if not task.done:
                task.cancel()
            events.close()

    return StreamingResponse(stream(), media_type="text/event-stream")


async def main() -> None:
    import httpx
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 (uvicorn has no started event)
        await asyncio.sleep(0.01)
    async with (httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client,
                client.stream("GET", "/ask", params={"q": "plan a trip"}) as response):
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                data = json.loads(line[6:])
                if isinstance(data, dict):
                    print("  " + "/".join(data["path"]), data["kind"])
                else:
                    print("answer:", data)
    server.should_exit = True
    await serving


if __name__ == "__main__":
    asyncio.run(main())
