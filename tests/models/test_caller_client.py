"""A caller-owned httpx client that reads or sends the request body more than once.

The adapters hand httpx the body as a stream, so that a call parked in its reply
holds no copy of the conversation (bench/README.md, W7 parked). httpx may still read
that stream more than once within ``send``: a transport that retries (as retrying
transports for httpx do), an auth flow that answers a 401 with the request again.
And a request hook may read ``request.content``, which httpx refuses for a streamed
body: such a client is given the body as bytes.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agentcore import Message, ModelRequest, ModelResponse, Usage
from agentcore.models import AnthropicChatModel, OpenAIChatModel
from tests.models._fakeapi import FakeAPI, Reply, json_reply, sse
from tests.models._support import ignore

KEY = "sk-caller-client-key-0123456789"
REQUEST = ModelRequest((Message("user", "hi"),))
ANSWER = ModelResponse(Message("assistant", "ok"), "stop", Usage(model="m"))
OPENAI_JSON = {
    "id": "x",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}
OPENAI_EVENTS = (
    sse({"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}),
    sse("[DONE]"),
)


def openai_reply(stream: bool) -> Reply:
    if stream:
        return Reply(chunks=OPENAI_EVENTS, content_type="text/event-stream")
    return json_reply(OPENAI_JSON)


async def call(model: Any, stream: bool) -> ModelResponse:
    if stream:
        response: ModelResponse = await model.stream(REQUEST, ignore)
    else:
        response = await model.complete(REQUEST)
    return response


class RetryOn503(httpx.AsyncBaseTransport):
    """A transport that sends a request again once when the server answered 503, as
    retrying transports for httpx do (the same request object, its stream read again)."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if response.status_code != 503:
            return response
        await response.aclose()
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_transport_that_sends_the_request_again_sends_the_same_body(
    api: FakeAPI, stream: bool
) -> None:
    api.replies += [json_reply({"error": {"message": "busy"}}, 503), openai_reply(stream)]
    async with httpx.AsyncClient(transport=RetryOn503()) as client:
        model = OpenAIChatModel("m", api_key=KEY, base_url=api.url, client=client)
        assert await call(model, stream) == ANSWER
    first, second = api.requests
    assert second.body == first.body == model.request_body(REQUEST, stream=stream)


class BasicThenRetry(httpx.Auth):
    """An auth flow that sends the request, and once more after a 401 (as digest does)."""

    def auth_flow(self, request: httpx.Request) -> Any:
        response = yield request
        if response.status_code == 401:
            request.headers["X-Retried"] = "1"
            yield request


@pytest.mark.parametrize("stream", [False, True])
async def test_an_auth_flow_that_sends_the_request_again_sends_the_same_body(
    api: FakeAPI, stream: bool
) -> None:
    api.replies += [json_reply({"error": {"message": "who?"}}, 401), openai_reply(stream)]
    async with httpx.AsyncClient(auth=BasicThenRetry()) as client:
        model = OpenAIChatModel("m", api_key=KEY, base_url=api.url, client=client)
        assert await call(model, stream) == ANSWER
    first, second = api.requests
    assert second.headers["x-retried"] == "1"
    assert second.body == first.body == model.request_body(REQUEST, stream=stream)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", [AnthropicChatModel, OpenAIChatModel])
async def test_a_request_hook_may_read_the_body(
    api: FakeAPI, stream: bool, kind: type[Any]
) -> None:
    seen: list[bytes] = []

    async def log_body(request: httpx.Request) -> None:
        seen.append(request.content)

    if kind is OpenAIChatModel:
        api.replies.append(openai_reply(stream))
    else:
        events = (
            sse({"type": "message_start", "message": {"usage": {"input_tokens": 0}}}),
            sse({"type": "content_block_start", "index": 0,
                 "content_block": {"type": "text", "text": ""}}),
            sse({"type": "content_block_delta", "index": 0,
                 "delta": {"type": "text_delta", "text": "ok"}}),
            sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
            sse({"type": "message_stop"}),
        )
        api.replies.append(
            Reply(chunks=events, content_type="text/event-stream") if stream else json_reply({
                "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            })
        )
    async with httpx.AsyncClient(event_hooks={"request": [log_body]}) as client:
        model = kind("m", api_key=KEY, base_url=api.url, client=client)
        assert await call(model, stream) == ANSWER
    [body] = seen
    assert json.loads(body) == api.requests[0].body == model.request_body(REQUEST, stream=stream)
