"""Usage as the adapters read it from provider-shaped replies over a real socket (issue
18 item 4, issue 22 item 2): cache tokens, the model the server names, and the cost
from genai-prices' snapshot or the caller's table, complete and streamed alike."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from agentcore import Message, ModelError, ModelRequest, Usage
from agentcore.models import AnthropicChatModel, ModelPrices, OpenAIChatModel
from tests.models._fakeapi import FakeAPI, json_reply, sse, sse_reply
from tests.models._support import Deltas

REQUEST = ModelRequest((Message("user", "hi"),))

# genai-prices' snapshot (the extra pins genai-prices>=0.2), in dollars per million
# tokens: gpt-4o-mini costs 0.15 input, 0.075 cached input, 0.60 output;
# claude-haiku-4-5 costs 1 input, 0.10 cache read, 1.25 cache write, 5 output.
# Decimal arithmetic, as genai-prices does, so the expected floats are exact.
GPT_4O_MINI_COST = float(
    ((1000 - 800) * Decimal("0.15") + 800 * Decimal("0.075") + 50 * Decimal("0.6"))
    / 1_000_000
)
HAIKU_COST = float(
    (10 * Decimal(1) + 100 * Decimal("1.25") + 2000 * Decimal("0.1") + 42 * Decimal(5))
    / 1_000_000
)

OPENAI_USAGE = {
    "prompt_tokens": 1000,
    "completion_tokens": 50,
    "total_tokens": 1050,
    "prompt_tokens_details": {"cached_tokens": 800, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0},
}
GPT_USAGE = Usage(
    1000, 50, cache_read_tokens=800, model="gpt-4o-mini-2024-07-18", cost=GPT_4O_MINI_COST
)
HAIKU_USAGE = Usage(
    2110,
    42,
    cache_read_tokens=2000,
    cache_write_tokens=100,
    model="claude-haiku-4-5-20251001",
    cost=HAIKU_COST,
)


def openai(api: FakeAPI, name: str = "gpt-4o-mini", **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel(name, api_key="sk-test", base_url=api.url, **kwargs)


def anthropic(api: FakeAPI, name: str = "claude-haiku-4-5", **kwargs: Any) -> AnthropicChatModel:
    return AnthropicChatModel(name, api_key="sk-ant-test", base_url=api.url, **kwargs)


def completion(usage: dict[str, Any], model: str | None = "gpt-4o-mini-2024-07-18") -> Any:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": usage,
    }
    if model is not None:
        body["model"] = model
    return json_reply(body)


def chunk(**fields: Any) -> bytes:
    return sse({"id": "c", "object": "chat.completion.chunk", "model": "gpt-4o-mini-2024-07-18",
                **fields})


def message(usage: dict[str, Any], model: str = "claude-haiku-4-5-20251001") -> Any:
    return json_reply(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "usage": usage,
        }
    )


def event(data: dict[str, Any]) -> bytes:
    return sse(data, event=data["type"])


ANTHROPIC_USAGE = {
    "input_tokens": 10,
    "cache_creation_input_tokens": 100,
    "cache_read_input_tokens": 2000,
    "output_tokens": 42,
}


def anthropic_stream(final_usage: dict[str, Any]) -> Any:
    start_usage = {**ANTHROPIC_USAGE, "output_tokens": 1}
    return sse_reply(
        [
            event({"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "content": [],
                "model": "claude-haiku-4-5-20251001", "usage": start_usage}}),
            event({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
            event({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": "ok"}}),
            event({"type": "content_block_stop", "index": 0}),
            event({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": final_usage}),
            event({"type": "message_stop"}),
        ]
    )


# -- OpenAI ------------------------------------------------------------------------------


async def test_openai_complete_reads_cached_tokens_model_and_cost(api: FakeAPI) -> None:
    api.replies.append(completion(OPENAI_USAGE))
    response = await openai(api).complete(REQUEST)
    assert response.usage == GPT_USAGE


async def test_openai_stream_reads_the_usage_chunk(api: FakeAPI) -> None:
    api.replies.append(
        sse_reply(
            [
                chunk(choices=[{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]),
                chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]),
                chunk(choices=[], usage=OPENAI_USAGE),
                sse("[DONE]"),
            ]
        )
    )
    deltas = Deltas()
    response = await openai(api).stream(REQUEST, deltas)
    assert (deltas, response.usage) == (["ok"], GPT_USAGE)


async def test_openai_without_details_or_model_names_the_configured_model(api: FakeAPI) -> None:
    api.replies.append(completion({"prompt_tokens": 1000, "completion_tokens": 50}, model=None))
    response = await openai(api).complete(REQUEST)
    cost = float((1000 * Decimal("0.15") + 50 * Decimal("0.6")) / 1_000_000)
    assert response.usage == Usage(1000, 50, model="gpt-4o-mini", cost=cost)


async def test_more_cached_than_prompt_tokens_counts_only_prompt_tokens(api: FakeAPI) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 0,
             "prompt_tokens_details": {"cached_tokens": 5000}}
    api.replies.append(completion(usage))
    response = await openai(api).complete(REQUEST)
    assert response.usage == Usage(
        10, 0, cache_read_tokens=10, model="gpt-4o-mini-2024-07-18",
        cost=float(10 * Decimal("0.075") / 1_000_000),
    )


@pytest.mark.parametrize(
    ("usage", "problem"),
    [
        ({"prompt_tokens": -1}, "usage.prompt_tokens is negative"),
        ({"prompt_tokens": 10**13}, "usage.prompt_tokens is over 1000000000000"),
        ({"prompt_tokens_details": {"cached_tokens": "x"}},
         "usage.prompt_tokens_details.cached_tokens is a string, not a number"),
        ({"prompt_tokens_details": []}, "usage.prompt_tokens_details is an array, not an object"),
    ],
)
async def test_a_bad_count_is_a_model_error_naming_it(
    api: FakeAPI, usage: dict[str, Any], problem: str
) -> None:
    api.replies.append(completion(usage))
    with pytest.raises(ModelError) as info:
        await openai(api).complete(REQUEST)
    assert str(info.value) == f"OpenAI API returned a malformed response: {problem}"


async def test_a_long_reported_model_id_is_cut_and_the_configured_one_priced(
    api: FakeAPI,
) -> None:
    api.replies.append(completion({"prompt_tokens": 1}, model="m" * 5000))
    response = await openai(api).complete(REQUEST)
    # genai-prices knows no "mmm...": the configured gpt-4o-mini's price is used.
    cost = float(Decimal("0.15") / 1_000_000)
    assert response.usage == Usage(1, 0, model="m" * 200 + "...", cost=cost)


# -- Anthropic ---------------------------------------------------------------------------


async def test_anthropic_complete_reads_cache_counts_model_and_cost(api: FakeAPI) -> None:
    api.replies.append(message(ANTHROPIC_USAGE))
    response = await anthropic(api).complete(REQUEST)
    assert response.usage == HAIKU_USAGE


@pytest.mark.parametrize(
    "final_usage",
    [
        {"output_tokens": 42},  # only the output count is cumulative in message_delta
        ANTHROPIC_USAGE,  # every count repeated, as newer API versions send them
    ],
)
async def test_anthropic_stream_reads_start_and_delta_usage(
    api: FakeAPI, final_usage: dict[str, Any]
) -> None:
    api.replies.append(anthropic_stream(final_usage))
    deltas = Deltas()
    response = await anthropic(api).stream(REQUEST, deltas)
    assert (deltas, response.usage) == (["ok"], HAIKU_USAGE)


async def test_anthropic_negative_cache_count_is_a_model_error(api: FakeAPI) -> None:
    api.replies.append(message({**ANTHROPIC_USAGE, "cache_read_input_tokens": -5}))
    with pytest.raises(ModelError) as info:
        await anthropic(api).complete(REQUEST)
    assert str(info.value) == (
        "Anthropic API returned a malformed response: usage.cache_read_input_tokens is negative"
    )


# -- the caller's prices -----------------------------------------------------------------


async def test_a_table_of_the_configured_name_wins_over_genai_prices(api: FakeAPI) -> None:
    table = {"claude-haiku-4-5": ModelPrices(input=2, output=10, cache_read=0.5, cache_write=4)}
    api.replies.append(message(ANTHROPIC_USAGE))
    response = await anthropic(api, prices=table).complete(REQUEST)
    assert response.usage.cost == (10 * 2 + 100 * 4 + 2000 * 0.5 + 42 * 10) / 1_000_000


async def test_a_table_of_the_served_name_wins_over_the_configured_name(api: FakeAPI) -> None:
    table = {
        "gpt-4o-mini": ModelPrices(input=1, output=1),
        "gpt-4o-mini-2024-07-18": ModelPrices(input=3, output=5),
    }
    api.replies.append(completion(OPENAI_USAGE))
    response = await openai(api, prices=table).complete(REQUEST)
    # No cache_read price: cached tokens are charged as input.
    assert response.usage.cost == (1000 * 3 + 50 * 5) / 1_000_000


async def test_a_local_model_is_free_only_when_the_table_says_so(api: FakeAPI) -> None:
    api.replies.append(completion({"prompt_tokens": 7, "completion_tokens": 3}, model=None))
    api.replies.append(completion({"prompt_tokens": 7, "completion_tokens": 3}, model=None))
    unknown = await openai(api, "my-local-model").complete(REQUEST)
    assert unknown.usage == Usage(7, 3, model="my-local-model", cost=None)
    free = {"my-local-model": ModelPrices(input=0, output=0)}
    known = await openai(api, "my-local-model", prices=free).complete(REQUEST)
    assert known.usage == Usage(7, 3, model="my-local-model", cost=0.0)
