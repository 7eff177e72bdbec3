"""Shared pieces of the subagent tests: a model that counts, a stream drain, a test sink,
a walk of the task tree."""

from __future__ import annotations

from typing import Any

import trio

from agentcore import Message, ModelRequest, ModelResponse
from subagent import Event, Stream, Task


class CountingModel:
    """A model that answers ``"<reply> <input>"`` after ``delay`` virtual seconds,
    recording how many calls run at once."""

    def __init__(self, delay: float = 1.0, reply: str = "done") -> None:
        self.delay = delay
        self.reply = reply
        self.active = 0
        self.max_active = 0
        self.inputs: list[str] = []
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        text = request.messages[-1].content
        self.inputs.append(text)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await trio.sleep(self.delay)
        finally:
            self.active -= 1
        return ModelResponse(Message("assistant", f"{self.reply} {text}"))


async def drain(stream: Stream) -> list[Event]:
    """Every event left in ``stream`` (which must be closed)."""
    return [event async for event in stream]


class RecordSink:
    """A ledger sink that keeps the records it is handed."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    async def record(self, record: Any) -> None:
        await trio.lowlevel.checkpoint()
        self.records.append(record)


def kinds(events: list[Event], path: tuple[str, ...] | None = None) -> list[str]:
    """The kinds of ``events`` (of one path if given), as plain strings."""
    return [str(e.kind) for e in events if path is None or e.path == path]


def all_tasks(roots: list[Task]) -> list[Task]:
    """``roots`` and every task below them."""
    found: list[Task] = []
    stack = list(roots)
    while stack:
        task = stack.pop()
        found.append(task)
        stack.extend(task.children)
    return found
