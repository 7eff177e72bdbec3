"""A pool served by a real Hypercorn server on 127.0.0.1 (an ephemeral port), in
process on trio, for the serve tests; and the scripted tree they drive: ``writer``
asks for one ``write_note`` call (deferred by the page's gate), then answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

import subagent
from agentcore import Message, ModelRequest, Usage, tool
from agentcore.testing import ScriptedModel, tool_call_reply
from ledger import MemorySink
from subagent import serve as served

TOKEN = "t0ken-for-the-serve-tests-0123456789"


@attrs.define
class Notes:
    """What the ``write_note`` tool wrote: one entry per call that ran."""

    written: list[str] = attrs.Factory(list)

    def tool(self) -> Any:
        @tool
        async def write_note(text: str) -> str:
            """Write a note (changes things: the page's gate defers it)."""
            self.written.append(text)
            return f"wrote {text}"

        return write_note


def writer_reply(request: ModelRequest) -> Message | str:
    """Ask for one write, then answer with the tool's result."""
    last = request.messages[-1]
    if last.role == "tool":
        return f"done: {last.content}"
    return tool_call_reply("write_note", '{"text": "hello"}', id="w1")


def specs(notes: Notes, answer: str = "plain answer") -> list[subagent.Spec]:
    return [
        subagent.Spec("writer", "Writes a note.", model=ScriptedModel(writer_reply),
                      tools=(notes.tool(),)),
        subagent.Spec("talker", "Answers.", model=ScriptedModel(lambda r: answer)),
    ]


def lead_reply(request: ModelRequest) -> Message | str:
    """Delegate the note to ``writer``, then report what it said."""
    last = request.messages[-1]
    if last.role == "tool":
        return f"the writer says: {last.content}"
    return tool_call_reply("subagent", json.dumps({"agent": "writer", "task": "write it"}),
                           id="d1")


def tree_specs(notes: Notes, answer: str) -> Callable[[subagent.Pool], list[subagent.Spec]]:
    """``lead`` delegating to ``writer`` (whose write waits for the page), and
    ``talker`` answering ``answer``; each call reports some tokens and a cost."""
    def make(pool: subagent.Pool) -> list[subagent.Spec]:
        usage = Usage(1200, 80, cost=0.0021)
        return [
            subagent.Spec("lead", "Delegates.", model=ScriptedModel(lead_reply, usage=usage),
                          tools=(subagent.SubagentTool(pool),)),
            subagent.Spec("writer", "Writes a note.",
                          model=ScriptedModel(writer_reply, usage=usage),
                          tools=(notes.tool(),)),
            subagent.Spec("talker", "Answers.",
                          model=ScriptedModel(lambda r: answer, usage=usage)),
        ]
    return make


@attrs.define
class Served:
    """A running server: its base URL (no trailing slash), the app and the pool."""

    url: str
    app: served.ServeApp
    pool: subagent.Pool

    def client(self, token: str | None = TOKEN, **headers: str) -> httpx.AsyncClient:
        """An HTTP client of the server (bearer ``token`` unless None)."""
        sent = dict(headers)
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        return httpx.AsyncClient(base_url=self.url, headers=sent, timeout=30)


def config() -> Config:
    cfg = Config()
    cfg.bind = ["127.0.0.1:0"]
    cfg.accesslog = None
    cfg.loglevel = "WARNING"
    cfg.graceful_timeout = 0.5
    return cfg


@asynccontextmanager
async def running(
    spec_list: list[subagent.Spec] | Callable[[subagent.Pool], list[subagent.Spec]], *,
    checkpoints: Path | None = None,
    audit: MemorySink | Any = None, max_events: int = served.MAX_EVENTS,
    max_concurrent: int = 8, stream_size: int = 256, budget: subagent.Budget | None = None,
) -> AsyncIterator[Served]:
    """Serve a pool of ``spec_list`` (the page's gate) until the block ends."""
    stream = subagent.Stream(stream_size)
    store = subagent.SqliteCheckpoints(checkpoints) if checkpoints is not None else None
    defaults = subagent.Defaults(gate=served.approve_on_the_page, audit=audit)
    try:
        async with subagent.open_pool(events=stream, checkpoints=store, defaults=defaults,
                                      max_concurrent=max_concurrent, max_queued=4096,
                                      budget=budget) as pool:
            for spec in spec_list if isinstance(spec_list, list) else spec_list(pool):
                pool.register(spec)
            application = served.app(pool, token=TOKEN, max_events=max_events, budget=budget)
            async with trio.open_nursery() as nursery:
                binds = await nursery.start(partial(serve, application, config()))  # type: ignore[arg-type]
                try:
                    yield Served(binds[0], application, pool)
                finally:
                    nursery.cancel_scope.cancel()
            pool.cancel()  # what a stopped server leaves: paused rows stay in the file
    finally:
        stream.close()
        if store is not None:
            await store.aclose()


async def wait_for(client: httpx.AsyncClient, path: str, check: Any) -> Any:
    """GET ``path`` until ``check(json)`` is true; returns that json. Polls on trio's
    clock, bounded (fails after 10 s)."""
    with trio.fail_after(10):
        while True:
            data = (await client.get(path)).json()
            if check(data):
                return data
            await trio.sleep(0.01)
