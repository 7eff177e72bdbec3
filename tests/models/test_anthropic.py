"""AnthropicChatModel against a fake messages-API server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agentcore import (
    ContextTooLongError,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolCall,
    TransientModelError,
    Usage,
)
from agentcore.models import AnthropicChatModel
from tests.models._fakeapi import FakeAPI, Reply, json_reply, sse, sse_reply
from tests.models._support import WEATHER, Deltas, ignore

KEY = "sk-ant-test-secret-456"
REQUEST = ModelRequest(
    (
        Message("system", "Be brief."),
        Message("user", "Weather in Paris and Rome?"),
        Message(
            "assistant",
            "Checking.",
            (
                ToolCall("toolu_1", "weather", '{"city": "Paris"}'),
                ToolCall("toolu_2", "weather", '{"city": "Rome"}'),
            ),
        ),
        Message("tool", "sunny", tool_call_id="toolu_1"),
        Message("tool", "no such city", tool_call_id="toolu_2", is_error=True),
        Message("user", "Also, be quick."),
    ),
    (WEATHER,),
)


# The usage of message(): the input counts summed, the cache counts apart, the model
# the reply names (which has no price).
CACHED_USAGE = Usage(25, 7, cache_read_tokens=2, cache_write_tokens=3, model="claude-test")


def model(api: FakeAPI, **kwargs: Any) -> AnthropicChatModel:
    return AnthropicChatModel("claude-test", api_key=KEY, base_url=api.url, **kwargs)


def message(content: list[dict[str, Any]], stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 20,
            "cache_creation_input_tokens": 3,
            "cache_read_input_tokens": 2,
            "output_tokens": 7,
        },
    }


def event(data: dict[str, Any]) -> bytes:
    return sse(data, event=data["type"])


START = event(
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-test",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 25, "output_tokens": 1},
        },
    }
)
PING = event({"type": "ping"})
STOP = event({"type": "message_stop"})


def block_start(index: int, block: dict[str, Any]) -> bytes:
    return event({"type": "content_block_start", "index": index, "content_block": block})


def block_delta(index: int, delta: dict[str, Any]) -> bytes:
    return event({"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> bytes:
    return event({"type": "content_block_stop", "index": index})


def message_delta(stop_reason: str, output_tokens: int) -> bytes:
    return event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        }
    )


async def test_complete_sends_the_documented_request(api: FakeAPI) -> None:
    api.replies.append(json_reply(message([{"type": "text", "text": "Sunny."}])))
    response = await model(api, max_tokens=512).complete(REQUEST)
    assert response == ModelResponse(Message("assistant", "Sunny."), "stop", CACHED_USAGE)
    [request] = api.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert (request.headers["x-api-key"], request.headers["anthropic-version"]) == (
        KEY,
        "2023-06-01",
    )
    assert "authorization" not in request.headers
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 512,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_2",
                        "name": "weather",
                        "input": {"city": "Rome"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "sunny",
                        "is_error": False,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "no such city",
                        "is_error": True,
                    },
                    {"type": "text", "text": "Also, be quick."},
                ],
            },
        ],
        "tools": [
            {
                "name": "weather",
                "description": "The weather in a city.",
                "input_schema": dict(WEATHER.parameters),
            }
        ],
    }


async def test_complete_returns_tool_calls(api: FakeAPI) -> None:
    content: list[dict[str, Any]] = [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {"city": "Oslo"}},
    ]
    api.replies.append(json_reply(message(content, "tool_use")))
    response = await model(api).complete(REQUEST)
    assert response == ModelResponse(
        Message(
            "assistant", "Let me check.", (ToolCall("toolu_9", "weather", '{"city": "Oslo"}'),)
        ),
        "tool_calls",
        CACHED_USAGE,
    )


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("refusal", "refusal"),
    ],
)
async def test_stop_reasons_are_mapped(api: FakeAPI, theirs: str, ours: str) -> None:
    api.replies.append(json_reply(message([{"type": "text", "text": "x"}], theirs)))
    assert (await model(api).complete(REQUEST)).finish_reason == ours


async def test_stream_delivers_deltas_and_the_whole_reply(api: FakeAPI) -> None:
    api.replies.append(
        sse_reply(
            [
                START,
                block_start(0, {"type": "text", "text": ""}),
                PING,
                block_delta(0, {"type": "text_delta", "text": "Hel"}),
                block_delta(0, {"type": "text_delta", "text": "lo"}),
                block_stop(0),
                message_delta("end_turn", 15),
                STOP,
            ]
        )
    )
    deltas = Deltas()
    response = await model(api).stream(REQUEST, deltas)
    assert deltas == ["Hel", "lo"]
    assert response == ModelResponse(
        Message("assistant", "Hello"), "stop", Usage(25, 15, model="claude-test")
    )
    assert api.requests[0].body["stream"] is True
    assert api.requests[0].headers["accept"] == "text/event-stream"


async def test_stream_assembles_tool_input_fragments(api: FakeAPI) -> None:
    api.replies.append(
        sse_reply(
            [
                START,
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "Checking."}),
                block_stop(0),
                block_start(
                    1, {"type": "tool_use", "id": "toolu_a", "name": "weather", "input": {}}
                ),
                block_delta(1, {"type": "input_json_delta", "partial_json": ""}),
                block_delta(1, {"type": "input_json_delta", "partial_json": '{"ci'}),
                block_delta(1, {"type": "input_json_delta", "partial_json": 'ty": "Paris"}'}),
                block_stop(1),
                block_start(2, {"type": "tool_use", "id": "toolu_b", "name": "now", "input": {}}),
                block_stop(2),
                message_delta("tool_use", 40),
                STOP,
            ]
        )
    )
    deltas = Deltas()
    response = await model(api).stream(REQUEST, deltas)
    assert deltas == ["Checking."]
    assert response == ModelResponse(
        Message(
            "assistant",
            "Checking.",
            (ToolCall("toolu_a", "weather", '{"city": "Paris"}'), ToolCall("toolu_b", "now", "{}")),
        ),
        "tool_calls",
        Usage(25, 40, model="claude-test"),
    )


async def test_429_is_transient_with_retry_after_date(api: FakeAPI) -> None:
    error = {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Number of requests exceeded"},
    }
    api.replies.append(json_reply(error, 429, [("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")]))
    with pytest.raises(TransientModelError) as info:
        await model(api).complete(REQUEST)
    assert str(info.value) == "Anthropic API error (HTTP 429): Number of requests exceeded"
    assert info.value.retry_after == 0.0  # a date in the past: retry now


async def test_529_overloaded_is_transient(api: FakeAPI) -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    api.replies.append(json_reply(error, 529))
    with pytest.raises(
        TransientModelError, match=r"^Anthropic API error \(HTTP 529\): Overloaded$"
    ):
        await model(api).stream(REQUEST, ignore)


async def test_prompt_too_long(api: FakeAPI) -> None:
    error = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    }
    api.replies.append(json_reply(error, 400))
    with pytest.raises(ContextTooLongError) as info:
        await model(api).complete(REQUEST)
    assert (
        str(info.value)
        == "Anthropic API error (HTTP 400): prompt is too long: 210000 tokens > 200000 maximum"
    )


async def test_other_400_is_a_model_error(api: FakeAPI) -> None:
    error = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
    }
    api.replies.append(json_reply(error, 400))
    with pytest.raises(ModelError) as info:
        await model(api).complete(REQUEST)
    assert type(info.value) is ModelError
    assert str(info.value) == "Anthropic API error (HTTP 400): max_tokens: Field required"


async def test_echoed_key_is_redacted(api: FakeAPI) -> None:
    error = {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"bad key {KEY}"},
    }
    api.replies.append(json_reply(error, 401))
    with pytest.raises(ModelError, match=r"^Anthropic API error \(HTTP 401\): bad key \*\*\*$"):
        await model(api).complete(REQUEST)


async def test_missing_key_is_a_model_error_before_any_request(api: FakeAPI) -> None:
    keyless = AnthropicChatModel("claude-test", api_key="", base_url=api.url)
    with pytest.raises(
        ModelError,
        match=r"^No Anthropic API key: pass api_key= or set the ANTHROPIC_API_KEY variable$",
    ):
        await keyless.complete(REQUEST)
    assert api.requests == []


async def test_malformed_json_is_a_model_error(api: FakeAPI) -> None:
    api.replies.append(Reply(body=b"[1, 2"))
    with pytest.raises(ModelError) as info:
        await model(api).complete(REQUEST)
    assert type(info.value) is ModelError
    assert str(info.value) == (
        "Anthropic API returned malformed JSON: Expecting ',' delimiter: line 1 column 6 (char 5)"
    )


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"stop_reason": "end_turn"}, "response.content is missing"),
        ({"content": [{"text": "x"}]}, "response.content[0].type is missing"),
        (
            {"content": [{"type": "tool_use", "id": "t", "name": "n", "input": []}]},
            "response.content[0].input is an array, not an object",
        ),
        (
            {"content": [], "usage": {"input_tokens": "many"}},
            "usage.input_tokens is a string, not a number",
        ),
    ],
)
async def test_missing_fields_are_a_model_error(api: FakeAPI, payload: Any, problem: str) -> None:
    api.replies.append(json_reply(payload))
    with pytest.raises(ModelError) as info:
        await model(api).complete(REQUEST)
    assert str(info.value) == f"Anthropic API returned a malformed response: {problem}"


async def test_error_event_mid_stream(api: FakeAPI) -> None:
    api.replies.append(
        sse_reply(
            [
                START,
                event(
                    {
                        "type": "error",
                        "error": {"type": "overloaded_error", "message": "Overloaded"},
                    }
                ),
            ]
        )
    )
    with pytest.raises(
        TransientModelError, match=r"^Anthropic API error \(error event\): Overloaded$"
    ):
        await model(api).stream(REQUEST, ignore)


async def test_malformed_event_is_a_model_error(api: FakeAPI) -> None:
    api.replies.append(
        sse_reply([START, event({"type": "content_block_delta", "delta": {"type": "text_delta"}})])
    )
    with pytest.raises(ModelError) as info:
        await model(api).stream(REQUEST, ignore)
    assert (
        str(info.value)
        == "Anthropic API returned a malformed stream: content_block_delta.index is missing"
    )


async def test_connection_dropped_mid_stream_is_transient(api: FakeAPI) -> None:
    api.replies.append(
        sse_reply(
            [
                START,
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "Hi"}),
            ],
            drop=True,
        )
    )
    deltas = Deltas()
    with pytest.raises(TransientModelError) as info:
        await model(api).stream(REQUEST, deltas)
    assert deltas == ["Hi"]
    assert str(info.value) == (
        "Anthropic connection failed: peer closed connection without sending complete message body "
        "(incomplete chunked read)"
    )


async def test_stream_ending_before_stop_is_transient(api: FakeAPI) -> None:
    api.replies.append(sse_reply([START, block_start(0, {"type": "text", "text": "Hi"})]))
    with pytest.raises(
        TransientModelError, match=r"^Anthropic stream ended before the reply was complete$"
    ):
        await model(api).stream(REQUEST, ignore)


async def test_read_timeout_is_configurable(
    api: FakeAPI, autojump_clock: trio.testing.MockClock
) -> None:
    api.replies.append(Reply(hang=True))
    start = trio.current_time()
    with pytest.raises(
        TransientModelError, match=r"^Anthropic request timed out \(read timeout\)$"
    ):
        await model(api, read_timeout=12.5).stream(REQUEST, ignore)
    assert trio.current_time() - start == 12.5


def test_repr_hides_the_key() -> None:
    m = AnthropicChatModel("claude-test", api_key=KEY, base_url="http://h")
    assert repr(m) == (
        "AnthropicChatModel(model='claude-test', api_key='***', base_url='http://h', "
        "connect_timeout=10.0, read_timeout=120.0, "
        "total_timeout=1200.0, max_response_bytes=33554432, max_text_chars=8388608, "
        "max_arguments_chars=8388608, max_tool_calls=256, max_event_chars=1048576, "
        "max_json_values=1048576, "
        "max_tokens=4096, temperature=None, client=None)"
    )
    assert KEY not in repr(m)


def test_key_and_base_url_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://proxy:8080")
    m = AnthropicChatModel("m")
    assert (m.api_key, m.base_url) == ("sk-ant-env", "http://proxy:8080")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    m = AnthropicChatModel("m")
    assert (m.api_key, m.base_url) == ("", "https://api.anthropic.com")
