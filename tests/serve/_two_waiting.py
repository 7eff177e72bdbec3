"""A served pool in a process of its own, for the test that kills it (SIGKILL):
``python -m tests.serve._two_waiting FOLDER`` serves, on 127.0.0.1 (an ephemeral
port, printed as ``subagent serve: URL``), a tree that pauses with two calls waiting:
``lead`` starts ``writer`` in the background (``wait: false``), then asks for a
``write_note`` (call ``c1``) while ``writer`` asks for one (``c2``); the gate (the
page's) holds each deferral until both are deferred, so both wait. Then ``lead``
waits for ``writer``'s result and answers. Checkpoints in ``FOLDER/c.db``, the
ledger in ``FOLDER/l.jsonl``; each write that runs appends its text to
``FOLDER/writes.log``."""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

import trio
from hypercorn.trio import serve

import agentcore
import ledger
import subagent
from agentcore import Message, ModelRequest, ToolCall
from agentcore.testing import ScriptedModel
from subagent import serve as served

from ._served import TOKEN, config

#: How the delegated writer's result starts, in the conversation of ``lead``.
RESULT = "[subagent result] "


def _assistant_turns(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


def lead_reply(request: ModelRequest) -> Message:
    n = _assistant_turns(request)
    if n == 0:
        start = json.dumps({"agent": "writer", "task": "write two", "wait": False})
        return Message("assistant", "", tool_calls=[ToolCall("start", "subagent", start)])
    if n == 1:
        return Message("assistant", "", tool_calls=[ToolCall("c1", "write_note",
                                                             '{"text": "one"}')])
    for m in request.messages:
        if m.role == "user" and m.content.startswith(RESULT):
            return Message("assistant", "lead done")
    return Message("assistant", "", tool_calls=[ToolCall(f"wait{n}", "subagent_results", "{}")])


def writer_reply(request: ModelRequest) -> Message:
    if _assistant_turns(request) == 0:
        return Message("assistant", "", tool_calls=[ToolCall("c2", "write_note",
                                                             '{"text": "two"}')])
    return Message("assistant", "writer done")


def both_deferred(count: int) -> agentcore.ToolGate:
    """The page's gate, each deferral held until ``count`` calls are deferred."""
    deferred: list[str] = []
    all_there = trio.Event()

    async def gate(request: agentcore.GateRequest) -> agentcore.GateDecision:
        decision = await served.approve_on_the_page(request)
        if decision.deferred:
            deferred.append(request.call.id)
            if len(deferred) >= count:
                all_there.set()
            await all_there.wait()
        return decision

    return gate


def register(pool: subagent.Pool, folder: Path) -> None:
    """The two specs; ``write_note`` appends its text to ``folder/writes.log``."""

    @agentcore.tool
    async def write_note(text: str) -> str:
        """Write a note (changes things: the page's gate defers it)."""
        with (folder / "writes.log").open("a") as f:
            f.write(text + "\n")
        return f"wrote {text}"

    pool.register(subagent.Spec(
        "lead", "Delegates.", model=ScriptedModel(lead_reply),
        tools=(subagent.SubagentTool(pool), subagent.SubagentResultsTool(pool), write_note)))
    pool.register(subagent.Spec("writer", "Writes.", model=ScriptedModel(writer_reply),
                                tools=(write_note,)))


async def main(folder: Path) -> None:
    stream = subagent.Stream(1024)
    sink = ledger.JsonlSink(folder / "l.jsonl")
    store = subagent.SqliteCheckpoints(folder / "c.db")
    defaults = subagent.Defaults(gate=both_deferred(2), audit=sink)
    try:
        async with subagent.open_pool(events=stream, checkpoints=store,
                                      defaults=defaults) as pool:
            register(pool, folder)
            application = served.app(pool, token=TOKEN)
            async with trio.open_nursery() as nursery:
                binds = await nursery.start(partial(serve, application, config()))  # type: ignore[arg-type]
                print(f"subagent serve: {binds[0]}/", flush=True)
    finally:
        stream.close()
        await sink.aclose()
        await store.aclose()


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]))
