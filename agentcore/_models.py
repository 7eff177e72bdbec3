"""The model protocols: what the loop calls to get the assistant's next message."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from ._messages import ModelRequest, ModelResponse

#: Awaited with each text delta of a streamed reply (may block: backpressure).
DeltaSink = Callable[[str], Awaitable[None]]


@runtime_checkable
class ChatModel(Protocol):
    """Anything with an async ``complete``: given the conversation and tools, the reply.

    Raise :class:`TransientModelError` for failures worth retrying (429, 5xx,
    timeouts) and :class:`ContextTooLongError` when the conversation is too long.
    """

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


@runtime_checkable
class StreamingChatModel(ChatModel, Protocol):
    """A model that can also stream: ``stream`` awaits ``on_delta`` with each text delta
    as it arrives and returns the complete response at the end.

    The loop uses ``stream`` when a model has it and turns each delta into a
    ``model_delta`` event.
    """

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse: ...
