"""Attacks on key hygiene: a key echoed where the text is cut short before masking."""

from __future__ import annotations

import pytest

from agentcore import ModelError
from agentcore.models import AnthropicChatModel
from tests.models._fakeapi import FakeAPI, Reply, sse, sse_reply
from tests.models._support import ignore
from tests.models.test_key_hygiene import KEY, REQUEST, leaks, openai


@pytest.mark.parametrize("pad", [80, 90, 95])
async def test_a_key_in_the_content_type_of_a_stream_is_masked_whole(
    api: FakeAPI, pad: int
) -> None:
    # The content type is cut to 100 characters: masking after the cut leaves the
    # first characters of a key that straddles it.
    api.replies.append(Reply(content_type="text/plain; v=" + "x" * pad + KEY, body=b"{}"))
    with pytest.raises(ModelError) as info:
        await openai(api).stream(REQUEST, ignore)
    assert leaks(str(info.value)) == []


@pytest.mark.parametrize("pad", [20, 25, 30])
async def test_a_key_in_an_event_name_is_masked_whole(api: FakeAPI, pad: int) -> None:
    api.replies.append(sse_reply([sse("not json", event="x" * pad + KEY)]))
    model = AnthropicChatModel("m", api_key=KEY, base_url=api.url)
    with pytest.raises(ModelError) as info:
        await model.stream(REQUEST, ignore)
    assert leaks(str(info.value)) == []
