"""Redirects from a model server: never followed, never taken for an answer.

httpx drops only ``Authorization`` on a cross-origin redirect, so a caller-owned client
with ``follow_redirects=True`` sent Anthropic's ``x-api-key`` (and, on a 307/308, the
whole conversation) to whatever host a server named.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import httpx
import pytest
import trio

from agentcore import Message, ModelError, ModelRequest
from agentcore.models import AnthropicChatModel, OpenAIChatModel
from tests.models._fakeapi import FakeAPI, Reply, json_reply
from tests.models._support import ignore

KEY = "sk-redirect-test-key-0123456789"
REQUEST = ModelRequest((Message("user", "hi"),))
OPENAI_ANSWER = {
    "id": "x",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}


async def other_host(nursery: trio.Nursery) -> FakeAPI:
    fake = FakeAPI()
    listeners = await nursery.start(partial(trio.serve_tcp, fake.handle, 0, host="127.0.0.1"))
    fake.port = listeners[0].socket.getsockname()[1]
    return fake


async def call(model: Any, stream: bool) -> None:
    if stream:
        await model.stream(REQUEST, ignore)
    else:
        await model.complete(REQUEST)


@pytest.mark.slow
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("api_name", ["Anthropic", "OpenAI"])
async def test_a_redirect_is_not_followed_by_a_client_that_follows_them(
    api: FakeAPI, nursery: trio.Nursery, status: int, stream: bool, api_name: str
) -> None:
    elsewhere = await other_host(nursery)
    elsewhere.replies.append(json_reply(OPENAI_ANSWER))
    api.replies.append(Reply(status, (("Location", elsewhere.url + "/v1/messages"),)))
    kind = AnthropicChatModel if api_name == "Anthropic" else OpenAIChatModel
    async with httpx.AsyncClient(follow_redirects=True) as client:
        model = kind("m", api_key=KEY, base_url=api.url, client=client)
        with pytest.raises(ModelError) as caught:
            await call(model, stream)
    assert elsewhere.requests == []
    assert type(caught.value) is ModelError
    assert str(caught.value) == (
        f"{api_name} API answered with a redirect (HTTP {status}), which is not followed"
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_a_redirect_with_an_answer_for_a_body_is_not_the_answer(
    api: FakeAPI, stream: bool
) -> None:
    api.replies.append(json_reply(OPENAI_ANSWER, status=307, headers=[("Location", "/x")]))
    with pytest.raises(ModelError) as caught:
        await call(OpenAIChatModel("m", api_key=KEY, base_url=api.url), stream)
    assert str(caught.value) == (
        "OpenAI API answered with a redirect (HTTP 307), which is not followed"
    )
