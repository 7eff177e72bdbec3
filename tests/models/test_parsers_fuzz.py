"""Any JSON a server sends either parses or raises Malformed (a ModelError at the
adapter boundary), never anything else."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore.models._anthropic import AnthropicStreamState, parse_anthropic_response
from agentcore.models._apierror import parse_api_error
from agentcore.models._openai import OpenAIStreamState, parse_openai_response
from agentcore.models._payload import Malformed

KEYS = st.sampled_from(
    [
        "choices", "message", "delta", "content", "tool_calls", "function", "name", "arguments",
        "id", "index", "finish_reason", "usage", "prompt_tokens", "completion_tokens", "type",
        "text", "input", "partial_json", "stop_reason", "input_tokens", "output_tokens",
        "content_block", "error", "message_start", "content_block_start", "content_block_delta",
        "message_delta", "text_delta", "input_json_delta", "tool_use",
    ]
)  # fmt: skip
SCALARS = st.none() | st.booleans() | st.integers(-2, 3) | st.floats(allow_nan=False) | KEYS
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_parse_openai_response(payload: Any) -> None:
    with contextlib.suppress(Malformed):
        parse_openai_response(payload)


@given(JSON)
def test_parse_anthropic_response(payload: Any) -> None:
    with contextlib.suppress(Malformed):
        parse_anthropic_response(payload)


@pytest.mark.slow
@given(st.lists(st.dictionaries(KEYS, JSON, max_size=4), max_size=5))
def test_openai_stream_state(chunks: list[dict[str, Any]]) -> None:
    state = OpenAIStreamState()
    for chunk in chunks:
        with contextlib.suppress(Malformed):
            assert isinstance(state.feed(chunk), str)
    state.response()


@pytest.mark.slow
@given(st.lists(st.dictionaries(KEYS, JSON, max_size=4), max_size=5))
def test_anthropic_stream_state(events: list[dict[str, Any]]) -> None:
    state = AnthropicStreamState()
    for event in events:
        with contextlib.suppress(Malformed):
            assert isinstance(state.feed(event), str)
    state.response()


@given(st.binary())
def test_parse_api_error_never_raises(body: bytes) -> None:
    assert isinstance(parse_api_error(500, body).message, str)
