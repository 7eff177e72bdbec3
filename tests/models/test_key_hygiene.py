"""API keys: checked at construction, and never in any text a failure leaves behind."""

from __future__ import annotations

import json
import traceback
import urllib.parse
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore import Agent, ConfigurationError, EndReason, Message, ModelError, ModelRequest
from agentcore.models import AnthropicChatModel, OpenAIChatModel, resolve_model
from agentcore.models._keys import redact
from tests.agentcore._support import Recorder
from tests.models._fakeapi import FakeAPI, Reply, json_reply, sse, sse_reply
from tests.models._support import ignore

KEY = "sk-proj-Zq8xW2vB7nT4kL1mR9pA"
REQUEST = ModelRequest((Message("user", "hi"),))
CUT = 4096


def fragments(key: str, size: int = 6) -> list[str]:
    """Every run of ``size`` characters of ``key``."""
    return [key[i : i + size] for i in range(len(key) - size + 1)]


def leaks(text: str, key: str = KEY) -> list[str]:
    """The fragments of ``key`` found in ``text``."""
    return [part for part in fragments(key) if part in text]


def forms(key: str) -> dict[str, str]:
    """The forms a server may echo a key in."""
    return {
        "raw": key,
        "repr": repr(key),
        "bytes repr": repr(key.encode()),
        "escaped bytes": "".join(f"\\x{b:02x}" for b in key.encode()),
        "escaped bytes, upper hex": "".join(f"\\x{b:02X}" for b in key.encode()),
        "json unicode escapes": "".join(f"\\u{b:04x}" for b in key.encode()),
        "url-encoded": "".join(f"%{b:02X}" for b in key.encode()),
        "url-quoted": urllib.parse.quote(key, safe=""),
        "json string": json.dumps(key),
    }


def openai(api: FakeAPI, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-test", api_key=KEY, base_url=api.url, **kwargs)


# --- checked at construction ---------------------------------------------------------


async def test_surrounding_whitespace_is_stripped_from_the_key(api: FakeAPI) -> None:
    api.replies.append(json_reply({"choices": [{"message": {"content": "ok"}}]}))
    model = OpenAIChatModel("m", api_key=f"  {KEY}\n", base_url=api.url)
    assert model.api_key == KEY
    await model.complete(REQUEST)
    assert api.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_anthropic_key_from_the_environment_is_stripped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", f"{KEY}\r\n")
    assert AnthropicChatModel("m").api_key == KEY


ARGUMENT_ERROR = (
    "The key from the api_key argument holds a control character, a space or a non-ASCII "
    "character, which an HTTP header cannot carry: check how the key was stored "
    "(surrounding whitespace is already stripped)"
)


@pytest.mark.parametrize(
    "bad",
    [KEY[:10] + "\0" + KEY[10:], KEY + "\n\0", KEY[:5] + "\n" + KEY[5:], KEY[:8] + " " + KEY[8:],
     KEY + "é", KEY[:3] + "\x7f" + KEY[3:], KEY + "\x1b[2J"],
)
@pytest.mark.parametrize("kind", [OpenAIChatModel, AnthropicChatModel])
def test_a_key_a_header_cannot_carry_is_refused_without_quoting_it(
    kind: type[OpenAIChatModel] | type[AnthropicChatModel], bad: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        kind("m", api_key=bad, base_url="http://127.0.0.1:1")
    assert str(info.value) == ARGUMENT_ERROR
    assert info.value.__context__ is None
    assert leaks("".join(traceback.format_exception(info.value))) == []


@pytest.mark.parametrize(
    ("variable", "build"),
    [
        ("OPENAI_API_KEY", lambda: OpenAIChatModel("m")),
        ("ANTHROPIC_API_KEY", lambda: AnthropicChatModel("m")),
        ("OPENAI_API_KEY", lambda: resolve_model("openai:gpt-4o")),
        ("ANTHROPIC_API_KEY", lambda: resolve_model("anthropic:claude")),
    ],
)
def test_a_bad_key_in_the_environment_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, build: Any
) -> None:
    monkeypatch.setenv(variable, KEY[:12] + "\n" + KEY[12:])  # no NUL in a real environment
    with pytest.raises(ConfigurationError) as info:
        build()
    expected = ARGUMENT_ERROR.replace("the api_key argument", f"the {variable} variable")
    assert str(info.value) == expected
    assert leaks(str(info.value)) == []


def test_a_non_string_key_is_refused() -> None:
    with pytest.raises(
        ConfigurationError, match=r"^The key from the api_key argument must be a string, not bytes$"
    ):
        OpenAIChatModel("m", api_key=KEY.encode())  # type: ignore[arg-type]


# --- masked in what servers send ------------------------------------------------------


@pytest.mark.parametrize("form", list(forms(KEY)))
def test_every_form_of_the_key_is_masked(form: str) -> None:
    echoed = forms(KEY)[form]
    masked = redact(f"bad key {echoed}!", KEY)
    assert leaks(masked) == []
    assert masked.startswith("bad key ") and masked.endswith("!") and "***" in masked


@given(
    key=st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", min_size=8,
                max_size=60),
    form=st.sampled_from(list(forms("x" * 8))),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
)
def test_masking_any_key_in_any_form_leaves_none_of_it(
    key: str, form: str, before: str, after: str
) -> None:
    masked = redact(before + forms(key)[form] + after, key)
    assert key not in masked
    assert forms(key)[form] not in masked


@pytest.mark.parametrize("form", ["raw", "repr", "escaped bytes", "json unicode escapes"])
@pytest.mark.parametrize("body_kind", ["json message", "plain text"])
async def test_a_key_echoed_across_the_cut_leaves_nothing(
    api: FakeAPI, form: str, body_kind: str
) -> None:
    echoed = forms(KEY)[form]
    # Straddling the cut at every third offset: a cut made before masking would leave
    # the key's first characters in the message.
    for offset in range(1, len(echoed), 3):
        filler = "x" * (CUT - offset)
        text = filler + echoed + " trailing"
        if body_kind == "json message":
            body = json.dumps({"error": {"message": text}}).encode()
        else:
            body = text.encode()
        api.replies.append(Reply(401, body=body, content_type="text/plain"))
        with pytest.raises(ModelError) as info:
            await openai(api).complete(REQUEST)
        message = str(info.value)
        assert leaks(message) == [], (form, offset)
        # Masked first, then cut: what is left of the key is (part of) its mask.
        masked = "'***'" if form == "repr" else "***"
        shown = filler + masked + " trailing"
        shown = shown if len(shown) <= CUT else shown[:CUT] + "..."
        assert message == "OpenAI API error (HTTP 401): " + shown


async def test_a_key_in_an_error_event_is_masked_and_the_message_cut(api: FakeAPI) -> None:
    message = "y" * 10_000 + KEY
    error = {"error": {"message": message[:CUT - 4] + KEY + message, "type": "server_error"}}
    api.replies.append(sse_reply([sse(error)]))
    with pytest.raises(ModelError) as info:
        await openai(api).stream(REQUEST, ignore)
    assert str(info.value) == (
        "OpenAI API error (error event): " + "y" * (CUT - 4) + "***" + "y" + "..."
    )


async def test_a_huge_error_message_is_cut_to_4_kib(api: FakeAPI) -> None:
    api.replies.append(json_reply({"error": {"message": "z" * 900_000}}, 400))
    with pytest.raises(ModelError) as info:
        await openai(api).complete(REQUEST)
    assert str(info.value) == "OpenAI API error (HTTP 400): " + "z" * CUT + "..."


async def test_an_error_reply_is_read_only_to_its_first_mebibyte(api: FakeAPI) -> None:
    # 3 MiB of error JSON: past the first MiB it is not read, so it does not parse, and
    # the start of the body is shown instead.
    api.replies.append(json_reply({"error": {"message": "w" * (3 << 20)}}, 503))
    with pytest.raises(ModelError) as info:
        await openai(api).complete(REQUEST)
    assert str(info.value) == (
        'OpenAI API error (HTTP 503): {"error": {"message": "' + "w" * (CUT - 23) + "..."
    )


async def test_a_key_in_a_protocol_error_is_masked_and_nothing_is_chained(api: FakeAPI) -> None:
    # A reply h11 refuses, quoting the offending header line (with the key in it).
    api.replies.append(Reply(headers=((f"Echo {KEY}", "1"),)))
    with pytest.raises(ModelError) as info:
        await openai(api).complete(REQUEST)
    assert str(info.value) == (
        "OpenAI connection failed: illegal header line: bytearray(b'Echo ***: 1')"
    )
    assert (info.value.__cause__, info.value.__context__) == (None, None)


async def test_malformed_json_with_the_key_chains_no_decode_error(api: FakeAPI) -> None:
    # json.JSONDecodeError keeps the whole document in .doc: it must not be chained.
    api.replies.append(Reply(body=f'{{"echo": "{KEY}", oops'.encode()))
    with pytest.raises(ModelError) as info:
        await openai(api).complete(REQUEST)
    assert (info.value.__cause__, info.value.__context__) == (None, None)
    assert leaks("".join(traceback.format_exception(info.value))) == []


async def test_an_echoed_key_reaches_no_event_summary_or_exception(api: FakeAPI) -> None:
    for form in forms(KEY).values():
        api.replies.append(json_reply({"error": {"message": f"Bad key: {form}"}}, 401))
    for _ in forms(KEY):
        recorder = Recorder()
        result = await Agent(model=openai(api)).run("q", emit=recorder)
        assert result.summary.end_reason == EndReason.error
        assert result.exception is not None
        seen = [
            repr(result.summary),
            repr(result.exception.args),
            "".join(traceback.format_exception(result.exception)),
            *(repr(event) for event in recorder.events),
        ]
        assert [text for text in seen if leaks(text)] == []
        assert result.summary.error in (
            "ModelError: OpenAI API error (HTTP 401): Bad key: ***",
            "ModelError: OpenAI API error (HTTP 401): Bad key: '***'",  # the repr forms
            'ModelError: OpenAI API error (HTTP 401): Bad key: "***"',  # the JSON string
            "ModelError: OpenAI API error (HTTP 401): Bad key: b'***'",  # the bytes repr
        )


def test_an_httpx_error_quoting_the_header_is_masked() -> None:
    # The path a key with a newline used to take: h11 refuses the header and httpx
    # quotes it. Keys are refused before this now; the mapping masks it regardless.
    from agentcore.models._http import _transport_error, httpx

    model = openai(FakeAPI())
    exc = httpx.LocalProtocolError(f"Illegal header value b'Bearer {KEY}\\n'")
    error = _transport_error(model._endpoint, exc)
    assert str(error) == "OpenAI request failed: Illegal header value b'Bearer ***\\n'"
    assert KEY not in repr(model._endpoint) and KEY not in repr(model)
