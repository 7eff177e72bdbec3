"""Attacks on the event-stream parser: fields a sloppy or hostile server may send."""

from __future__ import annotations

from agentcore.models._sse import SSEParser
from tests.models._fakeapi import FakeAPI, sse, sse_reply
from tests.models._support import ignore
from tests.models.test_key_hygiene import REQUEST, openai


def test_a_retry_field_too_long_for_an_int_is_ignored() -> None:
    # int() refuses more than 4,300 digits with a ValueError.
    parser = SSEParser()
    events = parser.feed("retry: " + "9" * 5000 + "\ndata: x\n\n")
    assert [(e.data, e.retry) for e in events] == [("x", None)]


async def test_a_stream_with_a_huge_retry_still_parses(api: FakeAPI) -> None:
    chunk = sse({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]})
    api.replies.append(
        sse_reply([("retry: " + "9" * 5000 + "\n").encode(), chunk, b"data: [DONE]\n\n"])
    )
    response = await openai(api).stream(REQUEST, ignore)
    assert response.message.content == "hi"
