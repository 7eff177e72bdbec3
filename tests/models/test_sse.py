"""The server-sent events parser, and the pure helpers of the HTTP layer."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore.models._apierror import ApiError, parse_api_error, parse_retry_after
from agentcore.models._keys import redact
from agentcore.models._sse import ServerSentEvent, SSEParser, parse_events


def test_data_event_and_comment_lines() -> None:
    text = ': keep-alive\n\nevent: message_start\ndata: {"a": 1}\n\ndata: [DONE]\n\n'
    assert parse_events(text) == [
        ServerSentEvent('{"a": 1}', "message_start"),
        ServerSentEvent("[DONE]"),
    ]


def test_multi_line_data_is_joined_with_lf() -> None:
    assert parse_events("data: one\ndata:two\ndata\n\n") == [ServerSentEvent("one\ntwo\n")]


def test_crlf_cr_and_lf_line_endings() -> None:
    assert parse_events("data: a\r\n\r\ndata: b\r\rdata: c\n\n") == [
        ServerSentEvent("a"),
        ServerSentEvent("b"),
        ServerSentEvent("c"),
    ]


def test_only_one_leading_space_is_stripped() -> None:
    assert parse_events("data:  two spaces \n\n") == [ServerSentEvent(" two spaces ")]


def test_id_and_retry() -> None:
    text = "id: 7\nretry: 3000\ndata: x\n\nretry: soon\ndata: y\n\n"
    assert parse_events(text) == [
        ServerSentEvent("x", id="7", retry=3000),
        ServerSentEvent("y", id="7"),
    ]


def test_event_without_data_is_not_dispatched_and_resets_the_type() -> None:
    assert parse_events("event: ping\n\ndata: x\n\n") == [ServerSentEvent("x")]


def test_unknown_fields_are_ignored_and_bom_is_skipped() -> None:
    assert parse_events("\ufeffdata: x\nfoo: bar\n\n") == [ServerSentEvent("x")]


def test_end_dispatches_an_event_missing_its_blank_line_and_drops_a_cut_line() -> None:
    parser = SSEParser()
    assert parser.feed("data: whole\n") == []
    assert parser.end() == [ServerSentEvent("whole")]
    parser = SSEParser()
    assert parser.feed("data: whole\ndata: cu") == []
    assert parser.end() == [ServerSentEvent("whole")]


def test_a_cr_at_a_chunk_boundary_is_one_line_ending() -> None:
    parser = SSEParser()
    assert parser.feed("data: a\r") == []
    assert parser.feed("") == []
    assert parser.feed("\n\r\n") == [ServerSentEvent("a")]


_SSE_ALPHABET = st.sampled_from(
    ["data", "event", "id", "retry", ":", " ", "\r", "\n", "x", "7", "\ufeff", "é"]
)


@given(st.lists(_SSE_ALPHABET).map("".join), st.data())
def test_chunking_never_changes_the_events(text: str, data: st.DataObject) -> None:
    """Any text parses (never raises), and the same way however it is split."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    parser = SSEParser()
    events: list[ServerSentEvent] = []
    start = 0
    for cut in [*cuts, len(text)]:
        events += parser.feed(text[start:cut])
        start = cut
    events += parser.end()
    assert events == parse_events(text)


@given(st.text())
def test_any_text_parses(text: str) -> None:
    for event in parse_events(text):
        assert isinstance(event.data, str)


NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, None),
        ("7", 7.0),
        (" 1.5 ", 1.5),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("soon", None),
        ("Wed, 01 Jan 2025 12:00:30 GMT", 30.0),
        ("Wed, 01 Jan 2025 11:00:00 GMT", 0.0),
    ],
)
def test_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header, now=NOW) == seconds


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'{"error": {"message": "m", "type": "t", "code": "c"}}', ApiError(400, "m", "t", "c")),
        (b'{"error": {"message": "m", "code": 42}}', ApiError(400, "m")),
        (b'{"error": "plain"}', ApiError(400, "plain")),
        (b'{"message": "top level"}', ApiError(400, "top level")),
        (b'{"error": {}}', ApiError(400, "(no message)")),
        (b"", ApiError(400, "(empty body)")),
        (b"  <html>bad gateway</html>\n", ApiError(400, "<html>bad gateway</html>")),
        # Whole: the cut comes later, after the key is masked.
        (b"x" * 6000, ApiError(400, "x" * 6000)),
    ],
)
def test_parse_api_error(body: bytes, error: ApiError) -> None:
    assert parse_api_error(400, body) == error


def test_redact() -> None:
    assert redact("key sk-12345678 echoed sk-12345678", "sk-12345678") == "key *** echoed ***"
    assert redact("model ollama not found", "ollama") == "model ollama not found"
    assert redact("nothing", "") == "nothing"
