"""``stream`` of the HTTP adapters is awaited as an ``async def`` is: calling it makes a
coroutine and raises nothing; the request is built when it is awaited (a subclass's
``request_body`` raising, or a cancelled task, gives its error there, in the task that
awaits it)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agentcore import Message, ModelError, ModelRequest
from agentcore.models import AnthropicChatModel, OpenAIChatModel

REQUEST = ModelRequest((Message("user", "hi"),))


class _OpenAI(OpenAIChatModel):
    def request_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        raise ModelError("no body for this request")


class _Anthropic(AnthropicChatModel):
    def request_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        raise ModelError("no body for this request")


async def _ignore(delta: str) -> None:
    pass


@pytest.mark.parametrize("kind", [_OpenAI, _Anthropic])
async def test_a_body_that_fails_fails_the_awaiting_task(kind: type[Any]) -> None:
    model = kind("m", api_key="k", base_url="http://127.0.0.1:9")
    call = model.stream(REQUEST, _ignore)  # raises nothing yet
    with pytest.raises(ModelError, match=r"^no body for this request$"):
        await call
    # Started as a task, the error is the child's, not start_soon's.
    with pytest.raises(ExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(model.stream, REQUEST, _ignore)
    assert [str(e) for e in info.value.exceptions] == ["no body for this request"]


@pytest.mark.parametrize("kind", [_OpenAI, _Anthropic])
async def test_a_cancelled_task_builds_no_request(kind: type[Any]) -> None:
    model = kind("m", api_key="k", base_url="http://127.0.0.1:9")
    with trio.CancelScope() as scope:
        scope.cancel()
        await model.stream(REQUEST, _ignore)
        raise AssertionError("not reached")
    assert scope.cancelled_caught
