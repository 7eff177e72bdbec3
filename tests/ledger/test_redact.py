from __future__ import annotations

import json

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from ledger import REDACTED, MemorySink, Record, redact, redact_record


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-proj-abcdefghijklmnop1234 used", f"key {REDACTED} used"),
        ("sk-ant-api03-AbCdEfGhIjKlMnOp-qrstu_vwx", REDACTED),
        ("Authorization: Bearer abc.def-ghi", f"Authorization: {REDACTED}"),
        ("sent Bearer xyz", f"sent Bearer {REDACTED}"),
        ("bearer eyabc123456789", f"bearer {REDACTED}"),
        ("clone with ghp_abcdefghijklmnopqrstuvwxyz0123", f"clone with {REDACTED}"),
        ("github_pat_11ABCDEFG0123456789_abcdefghij", REDACTED),
        ("aws AKIAIOSFODNN7EXAMPLE ok", f"aws {REDACTED} ok"),
        ("xoxb-123456789012-abcdefghij", REDACTED),
        ("key=0123456789abcdef0123456789abcdef", f"key={REDACTED}"),
        ("?key=c2VjcmV0LXNlY3JldC1zZWNyZXQ=&q=1", f"?key={REDACTED}&q=1"),
        ("password=hunter2&user=bob", f"password={REDACTED}&user=bob"),
        ("error: token: abc123 rejected", f"error: token: {REDACTED} rejected"),
        ("x-api-key: 1234", f"x-api-key: {REDACTED}"),
        ("client_secret='s p a c e'", f"client_secret='{REDACTED}'"),
        ('truncated {"password": "pw", "a', f'truncated {{"password": "{REDACTED}", "a'),
    ],
)
def test_secrets_in_text_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain text about keyboards and monkeys",
        "the bearer of bad news",
        "max_tokens=512 input_tokens: 12",
        "key=short",
        "task-1234567890abcdef",
        '{"query": "trio nurseries", "tokens": 5}',
        "token: null",
    ],
)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact(text) is text


def test_json_is_redacted_by_key_and_re_encoded() -> None:
    text = json.dumps(
        {
            "api_key": "anything",
            "headers": {"Authorization": "Bearer t0k3n", "Accept": "text/plain"},
            "accessToken": 12345,
            "max_tokens": 100,
            "note": "uses sk-abcdefghijklmnopqrst",
            "nested": json.dumps({"password": "pw"}),
            "list": [{"secret": ["a"]}, {"privateKey": None}],
        }
    )
    assert json.loads(redact(text)) == {
        "api_key": REDACTED,
        "headers": {"Authorization": REDACTED, "Accept": "text/plain"},
        "accessToken": REDACTED,
        "max_tokens": 100,
        "note": f"uses {REDACTED}",
        "nested": json.dumps({"password": REDACTED}, ensure_ascii=False),
        "list": [{"secret": REDACTED}, {"privateKey": None}],
    }


def test_json_without_secrets_keeps_its_formatting() -> None:
    text = '{ "keyword" :  "x",\n "token_count": 3 }'
    assert redact(text) is text


def test_record_fields_and_data_are_redacted() -> None:
    record = Record(
        "tool_result",
        "run",
        ("a/0001",),
        tool="http",
        arguments='{"url": "https://x", "api_key": "k"}',
        result="got Bearer abcdef123",
        error="401 for token=abcdef",
        reason="password: hunter2",
        data={"authorization": "Basic dXNlcjpwYXNz", "note": "sk-abcdefghijklmnopq1", "turns": 3},
    )
    clean = redact_record(record)
    assert clean.arguments == f'{{"url": "https://x", "api_key": "{REDACTED}"}}'
    assert clean.result == f"got Bearer {REDACTED}"
    assert clean.error == f"401 for token={REDACTED}"
    assert clean.reason == f"password: {REDACTED}"
    assert dict(clean.data) == {"authorization": REDACTED, "note": REDACTED, "turns": 3}
    assert (clean.tool, clean.path, clean.run_id) == ("http", ("a/0001",), "run")


def test_clean_record_is_returned_as_is() -> None:
    record = Record("prompt", arguments="hello", data={"tokens": 5})
    assert redact_record(record) is record


async def test_sinks_record_redacted_values() -> None:
    sink = MemorySink()
    await sink.record(Record("prompt", arguments="my key is sk-ant-abcdefghijklmnop"))
    [entry] = sink.entries  # a MemorySink returns no entry from record(): it chains on read
    assert entry.arguments == f"my key is {REDACTED}"
    assert "sk-ant" not in repr(sink.entries)


@given(st.text())
def test_redact_never_raises_and_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=12),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["a", "token", "api_key", "x"]), inner, max_size=3)
        ),
        max_leaves=10,
    )
)
def test_redacted_json_stays_json(value: object) -> None:
    text = json.dumps(value)
    json.loads(redact(text))


def test_trio_is_not_needed_by_redaction() -> None:
    assert trio  # the sink test above runs under trio; redact itself is sync


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("authorization: Basic dXNlcjpw\r\nHost: x", f"authorization: {REDACTED}\r\nHost: x"),
        ("Authorization=Token abc def", f"Authorization={REDACTED}"),
        ("password: correct horse battery staple\nok", f"password: {REDACTED}\nok"),
        ("password=hunter2 rest", f"password={REDACTED} rest"),
        ("é \\u0041 s\\u006b-proj-AbCdEfGhIjKlMnOp12 \\u0042", f"é \\u0041 {REDACTED} \\u0042"),
        ("mysql -h db -p'a b' x\nssh -pfoo", f"mysql -h db -p{REDACTED} x\nssh -pfoo"),
        ("https://user:p@ss@host/x?q=1", f"https://user:{REDACTED}@host/x?q=1"),
        ("DATABASE_URL='mysql://u:p@h/db' next", f"DATABASE_URL='{REDACTED}' next"),
        ("mysql -p[REDACTED]", "mysql -p[REDACTED]"),
    ],
)
def test_lines_escapes_and_urls(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_json_keys_that_redact_alike_keep_both_members() -> None:
    text = json.dumps({"sk-proj-AbCdEfGhIjKlMnOp12": 1, "sk-proj-ZyXwVuTsRqPoNm98": 2, "n": 3})
    assert json.loads(redact(text)) == {REDACTED: 1, f"{REDACTED}#2": 2, "n": 3}


def test_tool_name_and_call_id_are_redacted() -> None:
    record = Record("tool_request", tool="ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123", call_id="pwd=x")
    clean = redact_record(record)
    assert (clean.tool, clean.call_id) == (REDACTED, f"pwd={REDACTED}")
    assert redact_record(Record("tool_request", tool="echo", call_id="c1")).tool == "echo"
