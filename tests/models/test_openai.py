"""OpenAIChatModel against a fake chat-completions server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
import trio.testing

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
from agentcore.models import OpenAIChatModel
from tests.models._fakeapi import FakeAPI, Reply, json_reply, sse, sse_reply
from tests.models._support import WEATHER, Deltas, ignore

KEY = "sk-test-secret-key-123"
REQUEST = ModelRequest(
    (
        Message("system", "Be brief."),
        Message("user", "Weather in Paris?"),
        Message("assistant", "", (ToolCall("call_1", "weather", '{"city": "Paris"}'),)),
        Message("tool", "sunny", tool_call_id="call_1"),
    ),
    (WEATHER,),
)


def model(api: FakeAPI, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-test", api_key=KEY, base_url=api.url + "/v1", **kwargs)


def completion(message: dict[str, Any], finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    return sse(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
    )


# The usage of completion() and USAGE_CHUNK, with the model the adapter is configured
# with (the replies name none).
USAGE = Usage(12, 5, model="gpt-test")

USAGE_CHUNK = sse(
    {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 5}}
)


async def test_complete_sends_the_documented_request(api: FakeAPI) -> None:
    api.replies.append(json_reply(completion({"role": "assistant", "content": "Sunny."})))
    response = await model(api, max_tokens=100).complete(REQUEST)
    assert response == ModelResponse(Message("assistant", "Sunny."), "stop", USAGE)
    [request] = api.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "weather",
                    "description": "The weather in a city.",
                    "parameters": dict(WEATHER.parameters),
                },
            }
        ],
        "max_tokens": 100,
    }


async def test_complete_without_key_sends_no_authorization(api: FakeAPI) -> None:
    api.replies.append(json_reply(completion({"role": "assistant", "content": "hi"})))
    no_key = OpenAIChatModel("llama3.1:8b", api_key="", base_url=api.url)
    await no_key.complete(ModelRequest((Message("user", "hi"),)))
    assert "authorization" not in api.requests[0].headers
    assert api.requests[0].path == "/chat/completions"
    assert "tools" not in api.requests[0].body


async def test_complete_returns_tool_calls(api: FakeAPI) -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Rome"}'},
            },
            # Some compatible servers send the arguments as an object.
            {
                "id": "call_10",
                "type": "function",
                "function": {"name": "weather", "arguments": {"city": "Oslo"}},
            },
        ],
    }
    api.replies.append(json_reply(completion(message, "tool_calls")))
    response = await model(api).complete(REQUEST)
    assert response == ModelResponse(
        Message(
            "assistant",
            "",
            (
                ToolCall("call_9", "weather", '{"city":"Rome"}'),
                ToolCall("call_10", "weather", '{"city": "Oslo"}'),
            ),
        ),
        "tool_calls",
        USAGE,
    )


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [("stop", "stop"), ("length", "length"), ("content_filter", "content_filter"), (None, "stop")],
)
async def test_finish_reasons_are_mapped(api: FakeAPI, theirs: str | None, ours: str) -> None:
    api.replies.append(json_reply(completion({"role": "assistant", "content": "x"}, theirs)))  # type: ignore[arg-type]
    assert (await model(api).complete(REQUEST)).finish_reason == ours


async def test_stream_delivers_deltas_and_the_whole_reply(api: FakeAPI) -> None:
    api.replies.append(
        sse_reply(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk({"content": "Hel"}),
                chunk({"content": "lo"}),
                chunk({}, "stop"),
                USAGE_CHUNK,
                sse("[DONE]"),
            ]
        )
    )
    deltas = Deltas()
    response = await model(api).stream(REQUEST, deltas)
    assert deltas == ["Hel", "lo"]
    assert response == ModelResponse(Message("assistant", "Hello"), "stop", USAGE)
    body = api.requests[0].body
    assert (body["stream"], body["stream_options"]) == (True, {"include_usage": True})
    assert api.requests[0].headers["accept"] == "text/event-stream"


async def test_a_call_parked_in_its_stream_is_one_coroutine_that_let_the_request_go(
    api: FakeAPI,
) -> None:
    # bench/README.md, W7 parked: waiting for its next chunk, a streamed call holds
    # stream_reply's frame over httpx's (no frame of the model's, no helper's), and
    # that frame no longer holds the request's body, headers or URL.
    first = chunk({"role": "assistant", "content": "Hel"})
    api.replies.append(Reply(chunks=(first,), hold=True, content_type="text/event-stream"))
    delivered = trio.Event()

    async def on_delta(text: str) -> None:
        delivered.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(model(api).stream, REQUEST, on_delta)
        await delivered.wait()
        await trio.testing.wait_all_tasks_blocked()
        (task,) = nursery.child_tasks
        names: list[str] = []
        coro: Any = task.coro
        while hasattr(coro, "cr_code"):
            names.append(coro.cr_code.co_qualname)
            frame_locals = coro.cr_frame.f_locals
            coro = coro.cr_await
        assert names == ["stream_reply"]
        assert {"body", "headers", "url", "request"} & set(frame_locals) == set()
        nursery.cancel_scope.cancel()
    assert api.requests[0].body["messages"][1] == {
        "role": "user", "content": "Weather in Paris?"
    }


async def test_stream_assembles_tool_call_fragments(api: FakeAPI) -> None:
    def call(index: int, **fields: Any) -> dict[str, Any]:
        return {"tool_calls": [{"index": index, **fields}]}

    api.replies.append(
        sse_reply(
            [
                chunk({"role": "assistant", "content": None}),
                chunk(
                    call(
                        0,
                        id="call_a",
                        type="function",
                        function={"name": "weather", "arguments": ""},
                    )
                ),
                chunk(call(0, function={"arguments": '{"ci'})),
                chunk(call(0, function={"arguments": 'ty": "Paris"}'})),
                chunk(
                    call(
                        1,
                        id="call_b",
                        type="function",
                        function={"name": "weather", "arguments": ""},
                    )
                ),
                chunk(call(1, function={"arguments": '{"city": "Rome"}'})),
                chunk({}, "tool_calls"),
                USAGE_CHUNK,
                sse("[DONE]"),
            ]
        )
    )

    async def on_delta(text: str) -> None:
        raise AssertionError("no text expected")

    response = await model(api).stream(REQUEST, on_delta)
    assert response == ModelResponse(
        Message(
            "assistant",
            "",
            (
                ToolCall("call_a", "weather", '{"city": "Paris"}'),
                ToolCall("call_b", "weather", '{"city": "Rome"}'),
            ),
        ),
        "tool_calls",
        USAGE,
    )


async def test_429_is_transient_with_retry_after_seconds(api: FakeAPI) -> None:
    error = {
        "error": {
            "message": "Rate limit reached",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    api.replies.append(json_reply(error, 429, [("Retry-After", "7")]))
    with pytest.raises(TransientModelError) as info:
        await model(api).complete(REQUEST)
    assert str(info.value) == "OpenAI API error (HTTP 429): Rate limit reached"
    assert info.value.retry_after == 7.0


async def test_429_is_transient_when_streaming_too(api: FakeAPI) -> None:
    api.replies.append(
        json_reply({"error": {"message": "slow down"}}, 429, [("Retry-After", "0.5")])
    )
    with pytest.raises(TransientModelError) as info:
        await model(api).stream(REQUEST, ignore)
    assert (str(info.value), info.value.retry_after) == (
        "OpenAI API error (HTTP 429): slow down",
        0.5,
    )


async def test_500_is_transient_without_retry_after(api: FakeAPI) -> None:
    api.replies.append(Reply(500, body=b"upstream exploded", content_type="text/plain"))
    with pytest.raises(TransientModelError) as info:
        await model(api).complete(REQUEST)
    assert str(info.value) == "OpenAI API error (HTTP 500): upstream exploded"
    assert info.value.retry_after is None


async def test_context_length_exceeded(api: FakeAPI) -> None:
    error = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    api.replies.append(json_reply(error, 400))
    with pytest.raises(
        ContextTooLongError, match=r"^OpenAI API error \(HTTP 400\): This model's maximum"
    ):
        await model(api).complete(REQUEST)


async def test_other_4xx_is_a_model_error_with_the_key_redacted(api: FakeAPI) -> None:
    error = {"error": {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"}}
    api.replies.append(json_reply(error, 401))
    with pytest.raises(ModelError) as info:
        await model(api).complete(REQUEST)
    assert type(info.value) is ModelError
    assert str(info.value) == "OpenAI API error (HTTP 401): Incorrect API key provided: ***."


async def test_ollama_style_string_error(api: FakeAPI) -> None:
    api.replies.append(json_reply({"error": "model 'nope' not found"}, 404))
    with pytest.raises(
        ModelError, match=r"^OpenAI API error \(HTTP 404\): model 'nope' not found$"
    ):
        await model(api).complete(REQUEST)


async def test_malformed_json_is_a_model_error(api: FakeAPI) -> None:
    api.replies.append(Reply(body=b"{not json"))
    with pytest.raises(ModelError) as info:
        await model(api).complete(REQUEST)
    assert type(info.value) is ModelError
    assert str(info.value) == (
        "OpenAI API returned malformed JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)"
    )


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"choices": []}, "response.choices is empty"),
        ({}, "response.choices is missing"),
        ([], "the response is an array, not an object"),
        ({"choices": [{"finish_reason": "stop"}]}, "choices[0].message is missing"),
        ({"choices": [{"message": {"content": 3}}]}, "message.content is a number, not a string"),
        (
            {
                "choices": [
                    {"message": {"tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}}
                ]
            },
            "message.tool_calls[0].function.name is missing",
        ),
    ],
)
async def test_missing_fields_are_a_model_error(api: FakeAPI, payload: Any, message: str) -> None:
    api.replies.append(json_reply(payload))
    with pytest.raises(ModelError) as info:
        await model(api).complete(REQUEST)
    assert str(info.value) == f"OpenAI API returned a malformed response: {message}"


async def test_malformed_stream_chunk_is_a_model_error(api: FakeAPI) -> None:
    api.replies.append(sse_reply([chunk({"content": "a"}), b"data: {oops\n\n"]))
    with pytest.raises(ModelError) as info:
        await model(api).stream(REQUEST, ignore)
    assert type(info.value) is ModelError
    assert str(info.value) == (
        "OpenAI API returned a malformed stream: a 'message' event's data is not valid JSON "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
    )


async def test_error_event_in_stream(api: FakeAPI) -> None:
    error = {"error": {"message": "The server had an error", "type": "server_error"}}
    api.replies.append(sse_reply([chunk({"content": "a"}), sse(error)]))
    with pytest.raises(
        TransientModelError, match=r"^OpenAI API error \(error event\): The server had an error$"
    ):
        await model(api).stream(REQUEST, ignore)


async def test_connection_dropped_mid_stream_is_transient(api: FakeAPI) -> None:
    api.replies.append(sse_reply([chunk({"content": "Hel"})], drop=True))
    deltas = Deltas()
    with pytest.raises(TransientModelError) as info:
        await model(api).stream(REQUEST, deltas)
    assert deltas == ["Hel"]
    assert str(info.value) == (
        "OpenAI connection failed: peer closed connection without sending complete message body "
        "(incomplete chunked read)"
    )


async def test_stream_answered_without_an_event_stream(api: FakeAPI) -> None:
    api.replies.append(json_reply(completion({"role": "assistant", "content": "x"})))
    with pytest.raises(ModelError) as info:
        await model(api).stream(REQUEST, ignore)
    assert type(info.value) is ModelError
    assert str(info.value) == (
        "OpenAI API answered a streaming request with application/json, not an event stream"
    )


async def test_stream_ending_before_finish_is_transient(api: FakeAPI) -> None:
    api.replies.append(sse_reply([chunk({"content": "Hel"})]))
    with pytest.raises(
        TransientModelError, match=r"^OpenAI stream ended before the reply was complete$"
    ):
        await model(api).stream(REQUEST, ignore)


async def test_stream_without_done_after_finish_is_accepted(api: FakeAPI) -> None:
    api.replies.append(sse_reply([chunk({"content": "ok"}, "stop")]))
    response = await model(api).stream(REQUEST, ignore)
    assert response == ModelResponse(Message("assistant", "ok"), "stop", Usage(model="gpt-test"))


async def test_a_body_held_open_after_the_end_marker_costs_the_call_a_quarter_second(
    api: FakeAPI, autojump_clock: trio.testing.MockClock
) -> None:
    # After [DONE] the call reads the body's few remaining bytes, so that a pooled
    # connection is kept; a server that never ends the body is given up on at once.
    events = (chunk({"content": "ok"}), chunk({}, "stop"), sse("[DONE]"))
    api.replies.append(Reply(chunks=events, hold=True, content_type="text/event-stream"))
    start = trio.current_time()
    response = await model(api).stream(REQUEST, ignore)
    assert response == ModelResponse(Message("assistant", "ok"), "stop", Usage(model="gpt-test"))
    assert trio.current_time() - start == 0.25


async def test_a_complete_reply_is_kept_when_total_timeout_ends_the_drained_tail(
    api: FakeAPI, autojump_clock: trio.testing.MockClock
) -> None:
    # The end marker is in: what is left is only the body's tail, read for the pool's
    # sake. total_timeout running out while it waits is no reason to throw the whole
    # reply away (and have the run retry it, its deltas delivered twice).
    events = (chunk({"content": "ok"}), chunk({}, "stop"), sse("[DONE]"))
    api.replies.append(Reply(chunks=events, hold=True, content_type="text/event-stream"))
    deltas = Deltas()
    start = trio.current_time()
    response = await model(api, total_timeout=0.1).stream(REQUEST, deltas)
    assert response == ModelResponse(Message("assistant", "ok"), "stop", Usage(model="gpt-test"))
    assert deltas == ["ok"]
    assert trio.current_time() - start == 0.1


async def test_read_timeout_is_transient(
    api: FakeAPI, autojump_clock: trio.testing.MockClock
) -> None:
    api.replies.append(Reply(hang=True))
    start = trio.current_time()
    with pytest.raises(TransientModelError, match=r"^OpenAI request timed out \(read timeout\)$"):
        await model(api, read_timeout=30.0).complete(REQUEST)
    assert trio.current_time() - start == 30.0


async def test_refused_connection_is_transient() -> None:
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    refused = OpenAIChatModel("gpt-test", api_key=KEY, base_url=f"http://127.0.0.1:{port}")
    with pytest.raises(TransientModelError) as info:
        await refused.complete(REQUEST)
    assert (
        str(info.value)
        == f"OpenAI connection failed: all attempts to connect to 127.0.0.1:{port} failed"
    )


async def test_bad_url_is_a_model_error() -> None:
    bad = OpenAIChatModel("gpt-test", api_key=KEY, base_url="ftp://example.invalid")
    with pytest.raises(ModelError) as info:
        await bad.complete(REQUEST)
    assert type(info.value) is ModelError
    assert (
        str(info.value)
        == "OpenAI request failed: Request URL has an unsupported protocol 'ftp://'."
    )


async def test_cancelled_mid_stream_leaves_nothing_behind(api: FakeAPI) -> None:
    api.replies.append(sse_reply([chunk({"content": "a"}), chunk({"content": "b"}), sse("[DONE]")]))
    deltas: list[str] = []
    with trio.CancelScope() as scope:

        async def on_delta(text: str) -> None:
            deltas.append(text)
            scope.cancel()
            await trio.lowlevel.checkpoint()

        await model(api).stream(REQUEST, on_delta)
    assert scope.cancelled_caught
    assert deltas == ["a"]


async def test_on_delta_errors_propagate(api: FakeAPI) -> None:
    api.replies.append(sse_reply([chunk({"content": "a"}), chunk({"content": "b"}), sse("[DONE]")]))

    async def on_delta(text: str) -> None:
        raise RuntimeError("consumer gone")

    with pytest.raises(RuntimeError, match=r"^consumer gone$"):
        await model(api).stream(REQUEST, on_delta)


@pytest.mark.parametrize("error", [
    httpx.ConnectError("webhook down"), httpx.ReadTimeout("webhook slow"),
    httpx.InvalidURL("no such webhook"),
])
async def test_on_delta_errors_of_httpx_propagate_as_they_are(
    api: FakeAPI, error: Exception
) -> None:
    # A consumer forwarding deltas over httpx: its failure is its own, not the model
    # server's (a TransientModelError would have the run call the model again).
    api.replies.append(sse_reply([chunk({"content": "a"}), chunk({"content": "b"}), sse("[DONE]")]))

    async def on_delta(text: str) -> None:
        raise error

    with pytest.raises(type(error)) as info:
        await model(api).stream(REQUEST, on_delta)
    assert info.value is error


def test_repr_hides_the_key() -> None:
    m = OpenAIChatModel("gpt-test", api_key=KEY, base_url="http://h/v1")
    assert repr(m) == (
        "OpenAIChatModel(model='gpt-test', api_key='***', base_url='http://h/v1', "
        "connect_timeout=10.0, read_timeout=120.0, "
        "total_timeout=1200.0, max_response_bytes=33554432, max_text_chars=8388608, "
        "max_arguments_chars=8388608, max_tool_calls=256, max_event_chars=1048576, "
        "max_json_values=1048576, "
        "max_tokens=None, temperature=None, stream_usage=True, client=None)"
    )


def test_key_and_base_url_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    m = OpenAIChatModel("m")
    assert (m.api_key, m.base_url) == ("sk-env", "http://localhost:11434/v1")
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    m = OpenAIChatModel("m")
    assert (m.api_key, m.base_url) == ("", "https://api.openai.com/v1")
