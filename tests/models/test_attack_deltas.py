"""Attacks on the streamed reply's accumulation: a tool call grown by tiny deltas."""

from __future__ import annotations

import time

import pytest

from agentcore.models._openai import OpenAIStreamState

# The smallest chunk that adds to a tool call's name: about 70 bytes as an event, so
# 400,000 of them fit in the default max_response_bytes (32 MiB).
NAME_DELTA = {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "a"}}]}}]}


def feed(count: int) -> float:
    state = OpenAIStreamState()
    start = time.thread_time()
    for _ in range(count):
        state.feed(NAME_DELTA)
    elapsed = time.thread_time() - start
    assert state.response().message.tool_calls[0].name == "a" * count
    return elapsed


@pytest.mark.slow
def test_a_name_grown_one_character_at_a_time_costs_linear_time() -> None:
    # Four times the deltas take about four times as long (a name concatenated in
    # place took twenty times as long: 6.5 s of CPU for one 28 MB reply).
    ratio = feed(400_000) / feed(100_000)
    assert ratio < 10, ratio
