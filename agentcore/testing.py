"""Deterministic models and tools for tests of agent code.

A :class:`ScriptedModel` replays a script; each item is one model call's reply::

    model = ScriptedModel([
        tool_call_reply("echo", '{"x": 1}'),     # first call: ask for a tool
        "done",                                   # second call: final answer
    ])

Items may be a ``str`` (final answer), a :class:`Message`, a :class:`ModelResponse`,
an exception instance (raised), :class:`Delayed` (sleep first, on trio's clock) or
:class:`Blocked` (wait for :meth:`ScriptedModel.release`). Instead of a list, pass a
function of the :class:`ModelRequest` returning an item (sync or async).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

import attrs
import trio

from ._errors import ModelError
from ._messages import Message, ModelRequest, ModelResponse, ToolCall, Usage
from ._models import DeltaSink
from ._tools._tools import Liveness


@attrs.frozen
class Delayed:
    """A script item that sleeps ``seconds`` (trio's clock) before giving ``then``."""

    seconds: float
    then: ScriptItem


@attrs.frozen
class Blocked:
    """A script item that waits until :meth:`ScriptedModel.release` before giving ``then``."""

    then: ScriptItem


ScriptItem: TypeAlias = str | Message | ModelResponse | BaseException | Delayed | Blocked
ScriptFn: TypeAlias = Callable[[ModelRequest], "ScriptItem | Awaitable[ScriptItem]"]

_call_ids = itertools.count(1)


def tool_call_reply(name: str, arguments: str = "{}", *, id: str | None = None,
                    content: str = "") -> Message:
    """An assistant message asking for one tool call (ids ``call_1``, ``call_2``... by default)."""
    call_id = id if id is not None else f"call_{next(_call_ids)}"
    return Message("assistant", content, tool_calls=(ToolCall(call_id, name, arguments),))


class ScriptExhaustedError(ModelError):
    """A :class:`ScriptedModel` was called more times than its script has replies."""


class ScriptedModel:
    """A ChatModel that replays a script (see the module docstring).

    Args:
      script: A sequence of items, or a function of the request returning one.
      usage: The usage reported for each reply that does not carry its own.

    Attributes:
      requests: Every request received, in order.
      blocked: How many calls are waiting for :meth:`release` now.
    """

    def __init__(self, script: Sequence[ScriptItem] | ScriptFn, *,
                 usage: Usage = Usage()) -> None:
        self._script = script
        self._usage = usage
        self._release = trio.Event()
        self.requests: list[ModelRequest] = []
        self.blocked = 0

    def __repr__(self) -> str:
        return f"<ScriptedModel calls={len(self.requests)} blocked={self.blocked}>"

    def release(self) -> None:
        """Let every call currently waiting on a :class:`Blocked` item go on. Not a checkpoint."""
        self._release.set()
        self._release = trio.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Return the next scripted reply. A checkpoint."""
        await trio.lowlevel.checkpoint()
        index = len(self.requests)
        self.requests.append(request)
        if callable(self._script):
            item = self._script(request)
            if inspect.isawaitable(item):
                item = await item
        elif index < len(self._script):
            item = self._script[index]
        else:
            raise ScriptExhaustedError(
                f"scripted model has no reply for call {index + 1} "
                f"(its script has {len(self._script)})"
            )
        return await self._resolve(item)

    async def _resolve(self, item: ScriptItem) -> ModelResponse:
        while True:
            if isinstance(item, Delayed):
                await trio.sleep(item.seconds)
                item = item.then
            elif isinstance(item, Blocked):
                self.blocked += 1
                try:
                    await self._release.wait()
                finally:
                    self.blocked -= 1
                item = item.then
            elif isinstance(item, BaseException):
                raise item
            elif isinstance(item, str):
                return ModelResponse(Message("assistant", item), "stop", self._usage)
            elif isinstance(item, Message):
                reason = "tool_calls" if item.tool_calls else "stop"
                return ModelResponse(item, reason, self._usage)
            else:
                return item


class StreamingScriptedModel(ScriptedModel):
    """A :class:`ScriptedModel` that also streams: each reply's text goes out as
    deltas of at most ``chunk`` characters before the reply is returned."""

    def __init__(self, script: Sequence[ScriptItem] | ScriptFn, *,
                 usage: Usage = Usage(), chunk: int = 4) -> None:
        super().__init__(script, usage=usage)
        self._chunk = chunk

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse:
        """Stream the next scripted reply's text, then return it. A checkpoint."""
        response = await self.complete(request)
        text = response.message.content
        for start in range(0, len(text), self._chunk):
            await on_delta(text[start:start + self._chunk])
        return response


ToolBehaviour: TypeAlias = str | BaseException | Callable[[str], "str | Awaitable[str]"]


class RecordingTool:
    """A tool that records its calls and answers with a fixed text, a function of the
    arguments, or by raising.

    Args:
      name: The tool name.
      behaviour: The result text, an exception to raise, or a function of the
        arguments (sync or async) returning the text.
      read_only: Whether the tool declares itself side-effect free.
      idempotent: Whether the tool declares that a call may safely run twice.
      delay: Seconds (trio's clock) each call sleeps first.
      block: When true, each call waits for :meth:`release`.

    Attributes:
      calls: The argument text of every call, in order of start.
      active: Calls running now; ``max_active``: the most ever at once.
    """

    liveness = Liveness.opaque

    def __init__(self, name: str = "echo", behaviour: ToolBehaviour = "ok", *,
                 description: str = "", read_only: bool = False, delay: float = 0.0,
                 block: bool = False, idempotent: bool = False) -> None:
        self.name = name
        self.description = description or f"the {name} test tool"
        self.parameters: Mapping[str, Any] = {"type": "object", "properties": {}}
        self.read_only = read_only
        self.idempotent = idempotent
        self._behaviour = behaviour
        self._delay = delay
        self._block = block
        self._release = trio.Event()
        self.calls: list[str] = []
        self.active = 0
        self.max_active = 0

    def __repr__(self) -> str:
        return f"<RecordingTool {self.name!r} calls={len(self.calls)} active={self.active}>"

    def release(self) -> None:
        """Let every blocked call go on. Not a checkpoint."""
        self._release.set()
        self._release = trio.Event()

    async def execute(self, arguments: str) -> str:
        """Record the call and answer it. A checkpoint."""
        self.calls.append(arguments)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await trio.lowlevel.checkpoint()
            if self._delay:
                await trio.sleep(self._delay)
            if self._block:
                await self._release.wait()
            behaviour = self._behaviour
            if isinstance(behaviour, BaseException):
                raise behaviour
            if isinstance(behaviour, str):
                return behaviour
            result = behaviour(arguments)
            if inspect.isawaitable(result):
                result = await result
            return result
        finally:
            self.active -= 1
