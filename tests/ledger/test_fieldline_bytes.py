"""fields_bytes (msgspec on the common entry) against fields_body and the Record path.

The differential property: for any fields, ``fields_bytes`` returns the UTF-8 (lone
surrogates passed through) of what ``fields_body`` returns, or the same sentinel; and a
body is byte for byte the canonical body of the redacted ``Record`` of those fields.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger._fieldline
from ledger import Record, redact_record
from ledger._encoding import canonical_body
from ledger._fieldline import LARGE, NOT_PLAIN, fields_body, fields_bytes
from ledger._redact import CLEAN_TEXTS, all_clean, redact_text

PREV = "0123456789abcdef" * 4
TIME = "2026-11-29T12:00:00.000000Z"

# Every code point, lone surrogates and controls included, and the fragments the
# redaction prefilter looks for (and ones that lower() turns into them).
chars = st.characters(codec=None, exclude_categories=())
fragments = st.sampled_from([
    "token=abc", "sk-proj-" + "a" * 40, "://", "\\u0041", "\\x41", "ABCDEFGHIJKLMNO",
    "Bearer x", "password: hunter2", "\u0130", "\u212a", "\u03a3", "eyJhbGciOi", "URL",
    "mysql -pswordfish", "key", "\x00", "\ud800", "\udfff", "\U0001f600", "\u2028",
])
texts = st.lists(st.text(chars, max_size=12) | fragments, max_size=4).map("".join)
optional_texts = st.none() | texts
floats = (
    st.floats()
    | st.sampled_from([
        -0.0, 0.0, 1e16, -1e16, 9999999999999998.0, 1e-4, -1e-4, 9.999999999999999e-05,
        1e-7, 5e-324, 1.7976931348623157e308, 1e22, 0.1, 123456789012345.67,
    ])
)
ints = (
    st.integers()
    | st.integers(min_value=2**62, max_value=2**65).flatmap(lambda n: st.sampled_from([n, -n]))
    | st.sampled_from([2**63, -(2**63), 2**64, 2**4096 - 1, -(2**4096) + 1, 2**4096, 2**5000])
)
scalars = st.none() | st.booleans() | ints | floats | texts
keys = st.text(chars, max_size=8) | st.sampled_from([
    "password", "api_key", "apiKey", "max_tokens", "x_key", "token", "input_tokens",
    "DATABASE_URL", "\u00e9", "\U0001f600", "\uffff",
])
datas = st.none() | st.dictionaries(keys, scalars, max_size=5) | st.dictionaries(
    keys, scalars, max_size=3).map(MappingProxyType)


@st.composite
def field_sets(draw: st.DrawFn) -> tuple[Any, ...]:
    return (
        draw(st.integers(min_value=1, max_value=2**70)),
        draw(st.just(TIME) | texts),
        draw(st.just(PREV) | st.text("0123456789abcdef", min_size=64, max_size=64)),
        draw(st.sampled_from(["prompt", "tool_result", "", "model_response"]) | texts),
        draw(texts),
        tuple(draw(st.lists(texts, max_size=3))),
        draw(texts),
        draw(optional_texts),
        draw(optional_texts),
        draw(optional_texts),
        draw(st.none() | st.sampled_from(["allow", "deny"]) | texts),
        draw(optional_texts),
        draw(optional_texts),
        draw(optional_texts),
        draw(st.none() | floats),
        draw(datas),
    )


def record_body(fields: tuple[Any, ...]) -> bytes:
    """The Record path's body of ``fields``: built, redacted, canonically encoded."""
    seq, time, prev, *content = fields
    *rest, data = content
    build: Any = Record
    record = redact_record(build(*rest, {} if data is None else data))
    return canonical_body(seq, time, record, prev).encode("utf-8", "surrogatepass")


def check(fields: tuple[Any, ...]) -> None:
    body = fields_body(*fields)
    got = fields_bytes(*fields)
    if body is NOT_PLAIN or body is LARGE:
        assert got is body
        return
    assert got == body.encode("utf-8", "surrogatepass")
    assert got == record_body(fields)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(field_sets())
def test_fields_bytes_is_fields_body_encoded(fields: tuple[Any, ...]) -> None:
    check(fields)


FLOATS = [
    -0.0, 0.0, 1e16, -1e16, 1e-7, 1e-4, 9.999999999999999e-05, 9999999999999998.0,
    5e-324, 1.7976931348623157e308, 1e22, 1e-05, 0.1, 1.5, 2.5e-3, 1234567890123456.8,
]


@pytest.mark.parametrize("value", FLOATS)
def test_floats_are_spelled_as_repr_spells_them(value: float) -> None:
    fields: tuple[Any, ...] = (
        1, TIME, PREV, "tool_result", "r", ("a",), "g", None, None, None, None, None,
        None, None, value, {"ratio": value, "n": 1},
    )
    got = fields_bytes(*fields)
    assert isinstance(got, bytes)
    text = float.__repr__(value)
    assert f'"duration":{text},'.encode() in got
    assert f'"ratio":{text}}}'.encode() in got
    check(fields)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_float_that_is_not_finite_is_not_plain(value: float) -> None:
    base: tuple[Any, ...] = (
        1, TIME, PREV, "tool_result", "r", ("a",), "g", None, None, None, None, None,
        None, None,
    )
    at_duration: tuple[Any, ...] = (*base, value, None)
    in_data: tuple[Any, ...] = (*base, None, {"x": value})
    assert fields_bytes(*at_duration) is NOT_PLAIN
    assert fields_bytes(*in_data) is NOT_PLAIN


@pytest.mark.parametrize("value", [
    "\x00\x01\x1f\x7f", "\u00e9\u4e2d\U0001f600", "\u2028\u2029", '"\\/', "\b\f\n\r\t",
    "\ud800", "a\udfffb",
])
def test_escapes_and_characters_are_spelled_as_json_dumps_spells_them(value: str) -> None:
    fields: tuple[Any, ...] = (
        2**63, value, PREV, "prompt", value, (value, "b"), value, value, value, value,
        None, value, value, value, None, {value: value, "a" + value: 2**64},
    )
    check(fields)


def test_a_secret_anywhere_is_redacted_as_the_record_path_redacts_it() -> None:
    secret = "sk-proj-" + "a" * 40
    for at in range(6):
        texts: list[str | None] = [None] * 6
        texts[at] = f"x {secret}"
        tool, call_id, arguments, reason, result, error = texts
        fields: tuple[Any, ...] = (
            1, TIME, PREV, "prompt", "r", ("a",), "g", tool, call_id, arguments, None,
            reason, result, error, None, {"note": "clean", "n": 1},
        )
        got = fields_bytes(*fields)
        assert isinstance(got, bytes) and secret.encode() not in got
        check(fields)
    for data in ({"note": secret}, {"token": 12345}, {"api_key": secret}, {"password": "x"}):
        fields = (1, TIME, PREV, "prompt", "r", ("a",), "g", None, None, None, None, None,
                  None, None, None, data)
        got = fields_bytes(*fields)
        assert isinstance(got, bytes) and b"[REDACTED]" in got
        check(fields)


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, min_size=1, max_size=5))
def test_texts_found_clean_are_returned_by_redact_text_as_they_are(batch: list[str]) -> None:
    if all_clean(batch):
        for text in batch:
            assert redact_text(text) is text
    else:  # only "may hold": then one of them is a candidate on its own
        assert any(not all_clean([text]) for text in batch)


def test_the_cache_of_clean_texts_is_bounded() -> None:
    CLEAN_TEXTS.clear()
    short, long = ("word " * 30)[:128], ("word " * 30)[:129]
    assert all_clean([short, long, "plain words"])
    assert {short, "plain words"} == CLEAN_TEXTS
    assert not all_clean(["fine", "token=abc"])
    assert "fine" not in CLEAN_TEXTS
    for n in range(3000):
        assert all_clean([f"task {n}"])
        assert len(CLEAN_TEXTS) <= 1024
    assert "task 2999" in CLEAN_TEXTS


def test_this_msgspec_spells_the_common_entry_alike() -> None:
    assert ledger._fieldline.SPELLED_ALIKE is True


def test_without_msgspec_every_entry_takes_fields_body(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger._fieldline, "SPELLED_ALIKE", False)
    monkeypatch.setattr(ledger._fieldline, "_encode", None)  # never called
    monkeypatch.setattr(ledger._fieldline, "_encode_sorted", None)
    for data in (None, {"n": 1, "s": "x"}):
        check((1, TIME, PREV, "prompt", "r", ("a",), "g", "echo", "c1", "args", None, None,
               None, None, 0.5, data))


def test_long_data_keys_are_not_kept_after_their_entry() -> None:
    # The cache of data keys found clean holds a recorder's few short label sets:
    # entries whose keys are long (a hook's own data, say) leave nothing behind.
    import gc
    import tracemalloc

    from ledger._keys import key_class

    def entry(n: int) -> tuple[Any, ...]:
        key = f"{n:05d}" + "k" * 20_000
        return (1, TIME, PREV, "tool_result", "r", ("a",), "g", None, None, None, None,
                None, None, None, None, {key: n, "n": 1})

    check(entry(-1))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(200):
            assert isinstance(fields_bytes(*entry(n)), bytes)
        key_class.cache_clear()  # its own cache is bounded in count (2,048 keys)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 200_000  # 200 entries of 20 KB keys: 4 MB if the keys were kept


def test_a_msgspec_that_sorts_keys_by_utf16_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # Sorted by UTF-16 code units (as JavaScript sorts), a key of a character past the
    # BMP comes before one of U+E000-U+FFFF; the canonical encoding sorts by code point.
    import msgspec

    fieldline: Any = ledger._fieldline

    def utf16_sorted(body: Any) -> bytes:
        data = dict(sorted(body.data.items(), key=lambda item: item[0].encode("utf-16-be")))
        encoded: bytes = fieldline._encode(msgspec.structs.replace(body, data=data))
        return encoded

    monkeypatch.setattr(fieldline, "_encode_sorted", utf16_sorted)
    assert fieldline._spelled_alike() is False


def test_a_msgspec_that_refuses_a_probe_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # (An int past 64 bits, say: then every entry takes fields_body, the import stands.)
    def refuses(body: Any) -> bytes:
        raise OverflowError("can't serialize ints < -2**63 or > 2**64 - 1")

    monkeypatch.setattr(ledger._fieldline, "_encode_sorted", refuses)
    assert ledger._fieldline._spelled_alike() is False
