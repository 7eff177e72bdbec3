"""The stdio framing's sans-I/O core: lines of bounded length, and the count of JSON
values taken before a message is parsed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from subagent.mcp import McpMessageError, McpServerError
from subagent.mcp._framing import MAX_VALUES, Lines, check_values, count_values

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('ab,:[]{}"\\\n\u00e9')),
    lambda inner: st.lists(inner, max_size=5)
    | st.dictionaries(st.text(alphabet=st.sampled_from('k,:[{"\\')), inner, max_size=5),
    max_leaves=40,
)


def values_in(value: Any) -> int:
    # The count as documented: every value, object keys too; an empty array or
    # object one more.
    if isinstance(value, list):
        return 1 + (sum(values_in(v) for v in value) if value else 1)
    if isinstance(value, dict):
        return 1 + (sum(1 + values_in(v) for v in value.values()) if value else 1)
    return 1


@pytest.mark.parametrize(("text", "count"), [
    ("0", 1), ('"a"', 1), ("[]", 2), ("{}", 2), ("[1]", 2), ("[1,2]", 3),
    ('{"a":1}', 3), ('{"a":1,"b":[2,{}]}', 8), ('["a,b", ":[{"]', 3),
    ('"\\"[,"', 1), ('["\\\\",1]', 3),
])
def test_values_are_counted_outside_strings(text: str, count: int) -> None:
    assert count_values(text.encode()) == count


@pytest.mark.slow
@given(JSON, st.booleans())
def test_the_count_is_exact_for_any_json(value: Any, spaced: bool) -> None:
    separators = (", ", ": ") if spaced else (",", ":")
    for ascii_only in (True, False):
        text = json.dumps(value, separators=separators, ensure_ascii=ascii_only)
        assert count_values(text.encode()) == values_in(value)


@given(JSON, st.integers(min_value=1, max_value=50))
def test_the_count_stops_just_past_stop(value: Any, stop: int) -> None:
    data = json.dumps(value).encode()
    assert count_values(data, stop) == min(values_in(value), stop + 1)


def test_an_unclosed_string_runs_to_the_end() -> None:
    # Each quote would start a string scanned to the end and failing there: quadratic,
    # were an unclosed string not a match.
    assert count_values(b'"\\"' * 100_000 + b",,,") == 1
    assert count_values(b'[1,"abc') == 3
    assert count_values(b'[1,"abc\\') == 3


def test_a_message_at_the_bound_passes() -> None:
    data = b"[" + b",".join([b"0"] * (MAX_VALUES - 1)) + b"]"
    assert count_values(data) == MAX_VALUES
    check_values(data)


def test_a_message_past_the_bound_is_refused_naming_it() -> None:
    data = b"[" + b",".join([b"0"] * MAX_VALUES) + b"]"
    with pytest.raises(McpMessageError) as info:
        check_values(data)
    assert str(info.value) == "a message holds more than 65536 JSON values (MAX_VALUES)"
    assert isinstance(info.value, McpServerError)


def test_structure_inside_strings_does_not_count() -> None:
    # A result of 1 MiB of commas is one value, not a million.
    data = json.dumps({"result": {"content": [{"type": "text", "text": ",:[{" * 300_000}]}})
    check_values(data.encode())
    assert count_values(data.encode()) == 10


def test_nested_empty_containers_count() -> None:
    with pytest.raises(McpMessageError):
        check_values(b"[" + b"[]," * MAX_VALUES + b"[]]")


def lines_of(chunks: list[bytes], limit: int) -> list[bytes | None]:
    lines = Lines(limit)
    return [line for chunk in chunks for line in lines.feed(chunk)]


def test_lines_are_cut_at_newlines_and_a_partial_line_is_held() -> None:
    lines = Lines(10)
    assert list(lines.feed(b"ab\ncd")) == [b"ab"]
    assert repr(lines) == "<Lines limit=10 held=2 skipping=False>"
    assert list(lines.feed(b"ef\n\ngh\n")) == [b"cdef", b"", b"gh"]
    assert list(lines.feed(b"")) == []


def test_a_line_at_the_limit_passes_and_one_past_it_does_not() -> None:
    assert lines_of([b"x" * 10 + b"\n"], 10) == [b"x" * 10]
    assert lines_of([b"x" * 11 + b"\n", b"ok\n"], 10) == [None, b"ok"]
    assert lines_of([b"x" * 6, b"x" * 5 + b"\nok\n"], 10) == [None, b"ok"]


def test_a_long_line_is_reported_once_as_soon_as_it_passes_the_limit() -> None:
    lines = Lines(10)
    assert list(lines.feed(b"x" * 11)) == [None]
    assert repr(lines) == "<Lines limit=10 held=0 skipping=True>"
    # What follows, however much, is skipped and never held.
    for _ in range(100):
        assert list(lines.feed(b"y" * 1000)) == []
    assert repr(lines) == "<Lines limit=10 held=0 skipping=True>"
    assert list(lines.feed(b"yy\nnext\n")) == [b"next"]


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@given(st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=8),
       st.lists(st.integers(min_value=0, max_value=300), max_size=10),
       st.integers(min_value=1, max_value=20))
def test_chunking_does_not_change_the_lines(
    lines: list[bytes], cuts: list[int], limit: int
) -> None:
    data = b"".join(line + b"\n" for line in lines)
    expected = [line if len(line) <= limit else None for line in lines]
    assert lines_of([data], limit) == expected
    assert lines_of(split(data, cuts), limit) == expected
    assert lines_of([data[i:i + 1] for i in range(len(data))], limit) == expected


@given(st.binary(max_size=200), st.lists(st.integers(min_value=0, max_value=200), max_size=10),
       st.integers(min_value=1, max_value=20))
def test_no_line_past_the_limit_is_ever_given_or_held(
    data: bytes, cuts: list[int], limit: int
) -> None:
    lines = Lines(limit)
    for chunk in split(data, cuts):
        for line in lines.feed(chunk):
            assert line is None or (len(line) <= limit and b"\n" not in line)
        assert int(repr(lines).split("held=")[1].split()[0]) <= limit
