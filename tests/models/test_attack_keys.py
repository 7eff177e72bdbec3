"""Attacks on key hygiene: a key echoed where the text is cut short before masking."""

from __future__ import annotations

import urllib.parse

import pytest

from agentcore import ModelError
from agentcore.models import AnthropicChatModel
from agentcore.models._limits import ERROR_BODY_BYTES
from tests.models._fakeapi import FakeAPI, Reply, sse, sse_reply
from tests.models._support import ignore
from tests.models.test_key_hygiene import KEY, REQUEST, forms, leaks, openai


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


@pytest.mark.parametrize("form", ["raw", "url-encoded"])
@pytest.mark.parametrize("kept", [10, 20])
async def test_a_key_across_the_error_body_cut_is_not_quoted_in_part(
    api: FakeAPI, form: str, kept: int
) -> None:
    # The error body is read up to 1 MiB; leading whitespace is stripped from a
    # body that is not JSON, so what precedes the cut is quoted first.
    echoed = forms(KEY)[form]
    body = b" " * (ERROR_BODY_BYTES - kept) + echoed.encode()
    api.replies.append(Reply(status=400, body=body, content_type="text/plain"))
    with pytest.raises(ModelError) as info:
        await openai(api).complete(REQUEST)
    message = str(info.value)
    assert message.startswith("OpenAI API error (HTTP 400): ")
    assert leaks(message) == []
    assert leaks(urllib.parse.unquote(message)) == []
