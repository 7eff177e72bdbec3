"""The bounds on replies, each with its exact error; deadlines in virtual time; depth."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from agentcore import (
    Agent,
    ConfigurationError,
    EventKind,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    RetryPolicy,
    ToolCall,
    TransientModelError,
    Usage,
)
from agentcore.models import AnthropicChatModel, OpenAIChatModel
from agentcore.models._anthropic import AnthropicStreamState
from agentcore.models._limits import LimitExceeded
from agentcore.models._payload import _encode_without_recursion, encode_input
from agentcore.models._sse import ServerSentEvent, SSEParser
from agentcore.testing import ScriptedModel
from tests.agentcore._support import Recorder
from tests.models._fakeapi import FakeAPI, Reply, json_reply, sse, sse_reply
from tests.models._support import Deltas, ignore

KEY = "sk-bounds-test-key"
REQUEST = ModelRequest((Message("user", "hi"),))


def openai(api: FakeAPI, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-test", api_key=KEY, base_url=api.url, **kwargs)


def anthropic(api: FakeAPI, **kwargs: Any) -> AnthropicChatModel:
    return AnthropicChatModel("claude-test", api_key=KEY, base_url=api.url, **kwargs)


def text_chunk(text: str, finish: str | None = None) -> bytes:
    return sse({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]})


def call(index: int, arguments: str) -> dict[str, Any]:
    return {"id": f"c{index}", "type": "function",
            "function": {"name": "t", "arguments": arguments}}


# --- configuration -------------------------------------------------------------------


def test_total_timeout_defaults_to_ten_read_timeouts() -> None:
    assert OpenAIChatModel("m", api_key="", read_timeout=3.0).total_timeout == 30.0
    assert AnthropicChatModel("m", api_key="", read_timeout=0.5).total_timeout == 5.0
    assert OpenAIChatModel("m", api_key="", total_timeout=7).total_timeout == 7


@pytest.mark.parametrize(
    "name",
    ["max_response_bytes", "max_text_chars", "max_arguments_chars", "max_tool_calls",
     "max_event_chars", "max_json_values", "total_timeout", "read_timeout"],
)
@pytest.mark.parametrize("value", [0, -1, float("nan")])
def test_bounds_must_be_positive(name: str, value: float) -> None:
    kwargs: dict[str, Any] = {name: value}
    with pytest.raises(ConfigurationError) as info:
        OpenAIChatModel("m", api_key="", **kwargs)
    assert str(info.value) == f"{name} must be a positive number, not {value!r}"


# --- non-streamed replies --------------------------------------------------------------


async def test_a_body_past_max_response_bytes(api: FakeAPI) -> None:
    api.replies.append(json_reply({"choices": [{"message": {"content": "a" * 200}}]}))
    with pytest.raises(ModelError) as info:
        await openai(api, max_response_bytes=100).complete(REQUEST)
    assert type(info.value) is ModelError
    assert str(info.value) == "OpenAI reply is larger than max_response_bytes (100 bytes)"


async def test_a_body_of_exactly_max_response_bytes_is_read(api: FakeAPI) -> None:
    reply = json_reply({"choices": [{"message": {"content": "ok"}}]})
    api.replies.append(reply)
    response = await openai(api, max_response_bytes=len(reply.body)).complete(REQUEST)
    assert response.message == Message("assistant", "ok")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_text_chars": 9}, "reply's text is longer than max_text_chars (9 characters)"),
        ({"max_tool_calls": 1}, "reply has more tool calls than max_tool_calls (1)"),
        (
            {"max_arguments_chars": 10},
            "reply's tool arguments are longer than max_arguments_chars (10 characters)",
        ),
    ],
)
async def test_a_complete_reply_past_its_limits(
    api: FakeAPI, kwargs: dict[str, int], message: str
) -> None:
    body = {
        "choices": [
            {
                "message": {
                    "content": "0123456789",
                    "tool_calls": [call(1, '{"a": 1}'), call(2, "{}")],
                }
            }
        ]
    }
    api.replies.append(json_reply(body))
    assert (await openai(api).complete(REQUEST)).message.content == "0123456789"
    api.replies.append(json_reply(body))
    with pytest.raises(ModelError) as info:
        await openai(api, **kwargs).complete(REQUEST)
    assert str(info.value) == f"OpenAI {message}"


async def test_a_reply_past_max_json_values(api: FakeAPI) -> None:
    # {"choices": [{"message": {"content": "a,b"}}]}: 5 counted (the comma in the
    # string too), under 5 passes.
    api.replies.append(json_reply({"choices": [{"message": {"content": "a,b"}}]}))
    assert (await openai(api, max_json_values=5).complete(REQUEST)).message.content == "a,b"
    api.replies.append(json_reply({"choices": [{"message": {"content": "a,b"}}]}))
    with pytest.raises(ModelError) as info:
        await openai(api, max_json_values=4).complete(REQUEST)
    assert str(info.value) == "OpenAI reply has more JSON values than max_json_values (4)"


async def test_a_reply_nested_too_deeply_is_a_model_error(api: FakeAPI) -> None:
    deep = '{"content": [{"type": "tool_use", "id": "t", "name": "n", "input": {"a": '
    api.replies.append(Reply(body=(deep + "[" * 100_000 + "]" * 100_000 + "}}]}").encode()))
    with pytest.raises(ModelError) as info:
        await anthropic(api).complete(REQUEST)
    assert type(info.value) is ModelError
    assert str(info.value) == "Anthropic API returned malformed JSON: nested too deeply"
    assert info.value.__context__ is None


# --- streamed replies -----------------------------------------------------------------


async def test_streamed_text_past_max_text_chars(api: FakeAPI) -> None:
    api.replies.append(sse_reply([text_chunk("abcd"), text_chunk("efgh"), text_chunk("ij")]))
    deltas = Deltas()
    with pytest.raises(ModelError) as info:
        await openai(api, max_text_chars=9).stream(REQUEST, deltas)
    assert str(info.value) == "OpenAI reply's text is longer than max_text_chars (9 characters)"
    assert deltas == ["abcd", "efgh"]


async def test_streamed_tool_arguments_past_max_arguments_chars(api: FakeAPI) -> None:
    start = {"type": "tool_use", "id": "tu", "name": "t", "input": {}}
    events = [
        sse({"type": "content_block_start", "index": 0, "content_block": start}),
        *[
            sse({"type": "content_block_delta", "index": 0,
                 "delta": {"type": "input_json_delta", "partial_json": "[[[[["}})
        ]
        * 3,
    ]
    api.replies.append(sse_reply(events))
    with pytest.raises(ModelError) as info:
        await anthropic(api, max_arguments_chars=14).stream(REQUEST, ignore)
    assert str(info.value) == (
        "Anthropic reply's tool arguments are longer than max_arguments_chars (14 characters)"
    )


async def test_a_streamed_body_past_max_response_bytes(api: FakeAPI) -> None:
    api.replies.append(sse_reply([sse({"choices": []})] * 10))
    with pytest.raises(ModelError) as info:
        await openai(api, max_response_bytes=100).stream(REQUEST, ignore)
    assert str(info.value) == "OpenAI reply is larger than max_response_bytes (100 bytes)"


async def test_an_event_line_past_max_event_chars(api: FakeAPI) -> None:
    api.replies.append(sse_reply([b"data: " + b"x" * 30, b"x" * 30 + b"\n\n"]))
    with pytest.raises(ModelError) as info:
        await openai(api, max_event_chars=50).stream(REQUEST, ignore)
    assert str(info.value) == (
        "OpenAI stream has an event line or event longer than max_event_chars (50 characters)"
    )


async def test_a_stream_event_nested_too_deeply(api: FakeAPI) -> None:
    api.replies.append(sse_reply([b"data: " + b"[" * 100_000 + b"\n\n"]))
    with pytest.raises(ModelError) as info:
        await openai(api).stream(REQUEST, ignore)
    assert str(info.value) == (
        "OpenAI API returned a malformed stream: a 'message' event's data is not valid JSON "
        "(nested too deeply)"
    )


async def test_a_long_event_name_is_measured_in_the_message(api: FakeAPI) -> None:
    # Not quoted in part: a cut could end inside an echoed key (test_attack_keys).
    api.replies.append(sse_reply([f"event: {'e' * 500}\ndata: {{oops\n\n".encode()]))
    with pytest.raises(ModelError) as info:
        await anthropic(api).stream(REQUEST, ignore)
    assert str(info.value).startswith(
        "Anthropic API returned a malformed stream: a <500-character name> event's data is not"
    )


# --- deadlines (virtual time) -----------------------------------------------------------


async def test_total_timeout_ends_a_call_the_read_timeout_would_not(
    api: FakeAPI, autojump_clock: trio.testing.MockClock
) -> None:
    api.replies.append(Reply(hang=True))
    start = trio.current_time()
    with pytest.raises(TransientModelError) as info:
        await openai(api, read_timeout=30.0, total_timeout=12.5).complete(REQUEST)
    assert str(info.value) == "OpenAI call took longer than total_timeout (12.5 s)"
    assert info.value.retry_after is None
    assert trio.current_time() - start == 12.5


async def test_time_in_on_delta_does_not_count(
    api: FakeAPI, autojump_clock: trio.testing.MockClock
) -> None:
    api.replies.append(
        sse_reply([text_chunk("a"), text_chunk("b"), text_chunk("", "stop"), sse("[DONE]")])
    )

    async def slow_consumer(text: str) -> None:
        await trio.sleep(100)

    start = trio.current_time()
    response = await openai(api, total_timeout=10).stream(REQUEST, slow_consumer)
    assert response == ModelResponse(Message("assistant", "ab"), "stop", Usage(model="gpt-test"))
    assert trio.current_time() - start == 200


async def test_a_huge_retry_after_is_capped_at_max_delay(
    api: FakeAPI, autojump_clock: trio.testing.MockClock
) -> None:
    api.replies.append(json_reply({"error": {"message": "slow down"}}, 429,
                                  [("Retry-After", "86400")]))
    with pytest.raises(TransientModelError) as info:
        await openai(api).complete(REQUEST)
    assert info.value.retry_after == 86400.0  # the server's hint, as it said it
    assert RetryPolicy().delay(1, info.value.retry_after) == 60.0
    assert RetryPolicy(max_delay=5).delay(1, info.value.retry_after) == 5.0
    # In a run: the loop waits max_delay, not a day.
    recorder = Recorder()
    model = ScriptedModel([info.value, "ok"])
    result = await Agent(model=model).run("q", emit=recorder)
    assert (result.output, result.summary.duration) == ("ok", 60.0)
    [retry] = [e for e in recorder.events if e.kind == EventKind.retry]
    assert retry.text == (
        "TransientModelError: OpenAI API error (HTTP 429): slow down; retrying in 60s"
    )


# --- SSE parser ------------------------------------------------------------------------


def test_sse_line_at_the_limit_passes_and_one_more_character_fails() -> None:
    parser = SSEParser(max_event_chars=10)
    assert parser.feed("data: 1234\n\n") == [ServerSentEvent("1234")]
    assert parser.feed("data:12345\n\n") == [ServerSentEvent("12345")]
    with pytest.raises(LimitExceeded) as info:
        parser.feed("data: 12345\n")
    assert str(info.value) == (
        "stream has an event line or event longer than max_event_chars (10 characters)"
    )


def test_an_open_line_is_bounded_as_it_grows() -> None:
    parser = SSEParser(max_event_chars=10)
    assert parser.feed("data: ") == []
    assert parser.feed("1234") == []
    with pytest.raises(LimitExceeded):
        parser.feed("5")


def test_the_data_of_one_event_is_bounded_across_its_lines() -> None:
    parser = SSEParser(max_event_chars=10)
    assert parser.feed("data: 1234\ndata: 1234\n") == []
    with pytest.raises(LimitExceeded):
        parser.feed("data: 1\n")
    parser = SSEParser(max_event_chars=10)
    assert parser.feed("data: 1234\n\ndata: 1234\n\n") == [ServerSentEvent("1234")] * 2


def _feed_one_char_at_a_time(length: int) -> float:
    parser = SSEParser(max_event_chars=10 * length)
    start = time.thread_time()
    for _ in range(length):
        parser.feed("a")
    assert parser.feed("\n\n") == []
    return time.thread_time() - start


def test_an_open_line_is_buffered_in_linear_time() -> None:
    # Joining the buffer on every feed made this quadratic: 10x the input took 100x
    # the time. Linear is 10x; the slack covers a loaded machine.
    _feed_one_char_at_a_time(5_000)  # warm up
    small = min(_feed_one_char_at_a_time(20_000) for _ in range(3))
    large = min(_feed_one_char_at_a_time(200_000) for _ in range(3))
    assert large / small < 40


# --- re-encoding tool input at any depth ------------------------------------------------


def nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = {"k": value} if i % 2 else [value, "x"]
    return value


def test_encoding_a_tool_input_deeper_than_the_recursion_limit() -> None:
    expected = "1"
    for i in range(5000):
        expected = f'{{"k": {expected}}}' if i % 2 else f'[{expected}, "x"]'
    assert encode_input(nested(5000)) == expected


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=4), inner, max_size=4),
        max_leaves=30,
    )
)
def test_the_recursion_free_encoder_writes_what_json_dumps_writes(value: Any) -> None:
    assert _encode_without_recursion(value) == json.dumps(value)


def test_a_streamed_tool_input_of_any_depth_becomes_argument_text() -> None:
    state = AnthropicStreamState()
    block = {"type": "tool_use", "id": "tu", "name": "t", "input": {"a": nested(3000)}}
    state.feed({"type": "content_block_start", "index": 0, "content_block": block})
    [tool_call] = state.response().message.tool_calls
    assert tool_call.arguments == encode_input({"a": nested(3000)})


async def test_deep_tool_arguments_in_the_history_are_sent(api: FakeAPI) -> None:
    # Arguments the loop refused as too deep stay in the history; sending them back must
    # not raise. Too deep to parse at all: sent as {}; parseable: sent as they are.
    deep = "[" * 100_000 + "]" * 100_000
    parseable = "{\"a\": " + "[" * 600 + "]" * 600 + "}"
    history = ModelRequest(
        (
            Message("user", "hi"),
            Message("assistant", "", (ToolCall("a", "t", deep), ToolCall("b", "t", parseable))),
            Message("tool", "nested too deeply", tool_call_id="a", is_error=True),
            Message("tool", "nested too deeply", tool_call_id="b", is_error=True),
        )
    )
    api.replies.append(json_reply({"content": [{"type": "text", "text": "ok"}]}))
    await anthropic(api).complete(history)
    blocks = api.requests[0].body["messages"][1]["content"]
    assert blocks[0]["input"] == {}
    assert json.dumps(blocks[1]["input"]) == json.dumps(json.loads(parseable))
