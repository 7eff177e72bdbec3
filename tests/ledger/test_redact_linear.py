"""Redaction costs O(n) on every input, stays idempotent and bounded, and leaves
the event loop for large records.

The timing tests compare two timings taken in the same test (10x the input must
take at most 25x the time: a quadratic scan takes 100x); each ratio is the
smallest of a few measurements of the thread's CPU time (not wall time, which
a loaded machine inflates whenever it deschedules the test).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable

import pytest
import trio
import trio.testing
from hypothesis import given, settings, target
from hypothesis import strategies as st

from ledger import REDACTED, MemorySink, Record, redact
from ledger._offload import OFFLOAD_CHARS

MAX_RATIO = 25.0
SMALL = 2_000

_KEY_B64 = base64.b64encode(b"key sk-proj-abcdefghijklmnop12").decode()
_RANDOM_B64 = base64.b64encode(bytes(range(256)) * 4).decode()

# Each family repeats a piece that starts (and fails) a match of some rule.
FAMILIES: dict[str, Callable[[int], str]] = {
    "issue 14": lambda n: "token " + ".a" * (n // 2),
    "key=": lambda n: "key=" * (n // 4),
    "pwd=": lambda n: "pwd=" * (n // 4),
    "password: ": lambda n: "password: " * (n // 10),
    "unterminated quotes": lambda n: 'password="x ' * (n // 12),
    "unterminated quote to the end": lambda n: "token='" + "a " * (n // 2),
    "escaped quotes": lambda n: 'token: \\"' * (n // 9),
    "userinfo": lambda n: "https://a:" * (n // 10),
    "userinfo without @": lambda n: "a://" + "b:" * (n // 2),
    "run": lambda n: "x" * n,
    "dashes": lambda n: "-" * n,
    "escapes": lambda n: "\\u0041" * (n // 6),
    "mysql": lambda n: "mysql -p " * (n // 9),
    "nested objects": lambda n: '{"a":' * (n // 5),
    "nested arrays": lambda n: "[" * n,
    "nested JSON strings": lambda n: '"' + '{\\"a\\":' * (n // 8),
    "pem without end": lambda n: "-----BEGIN PRIVATE KEY-----" * (n // 27),
    "bearer": lambda n: "Bearer " * (n // 7),
    "jwt starts": lambda n: "eyJ" * (n // 3),
    "key prefixes": lambda n: "sk-ghp_AKIAxoxb-hf_" * (n // 19),
    "base64 blobs": lambda n: (_RANDOM_B64[:20] + " ") * (n // 21),
    "aws-sized blobs": lambda n: (_RANDOM_B64[:40] + " ") * (n // 41),
    "one base64 blob": lambda n: base64.b64encode(bytes(range(256)) * (n // 342 + 1)).decode(),
    "base64 keys": lambda n: (_KEY_B64 + " ") * (n // (len(_KEY_B64) + 1)),
    "secrets": lambda n: "sk-proj-abcdefghijklmnop12 " * (n // 27),
    "colons": lambda n: "a:" * (n // 2),
}


def _best_time(text: str, runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.thread_time()
        redact(text)
        best = min(best, time.thread_time() - start)
    return best


def growth(small: str, large: str, attempts: int = 5) -> float:
    """How many times longer ``large`` takes than ``small`` (the smallest of a few tries)."""
    ratio = float("inf")
    for _ in range(attempts):
        # Under 10 us, timer noise is larger than the time of the small input.
        ratio = min(ratio, _best_time(large) / max(_best_time(small), 1e-5))
        if ratio <= MAX_RATIO:
            break
    return ratio


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_ten_times_the_input_takes_about_ten_times_as_long(family: str) -> None:
    make = FAMILIES[family]
    small, large = make(SMALL), make(10 * SMALL)
    assert 9 * len(small) <= len(large) <= 11 * len(small) + 64
    assert growth(small, large) <= MAX_RATIO


PIECES = [
    "token",
    "key",
    "password",
    "Authorization",
    "Bearer ",
    "=",
    ": ",
    ":",
    '"',
    "'",
    "\\",
    '\\"',
    "\\u006b",
    "{",
    "}",
    "[",
    "]",
    ",",
    " ",
    "\n",
    ".",
    "-",
    "_",
    "a",
    "A1",
    "://",
    "@",
    "sk-",
    "eyJ",
    "AKIA",
    "mysql",
    " -p",
    "-----BEGIN PRIVATE KEY-----",
    "-----END PRIVATE KEY-----",
    _KEY_B64[:24],
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
]
units = (
    st.lists(st.sampled_from(PIECES) | st.text(max_size=3), min_size=1, max_size=12)
    .map("".join)
    .filter(bool)
)


@settings(max_examples=max(20, settings().max_examples // 8), deadline=None)
@given(units)
def test_no_input_grows_faster_than_linearly(unit: str) -> None:
    # The search steers towards the piece whose repetition costs most per byte.
    small = unit * (SMALL // len(unit) + 1)
    large = small * 10
    ratio = growth(small, large, attempts=1)
    target(ratio, label="time(10x input) / time(input)")
    if ratio > MAX_RATIO:
        ratio = growth(small, large)
    assert ratio <= MAX_RATIO, unit


texts = st.lists(st.sampled_from(PIECES) | st.text(max_size=8), max_size=30).map("".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


def check(text: str) -> None:
    once = redact(text)
    assert redact(once) == once
    assert len(once) <= 10 * len(text) + 10
    if once == text:
        assert once is text


@given(texts)
def test_redact_is_idempotent_and_bounded(text: str) -> None:
    check(text)


@pytest.mark.slow
@given(json_values, st.integers(0, 3))
def test_redacted_json_is_idempotent_and_stays_json(value: object, encodings: int) -> None:
    text = json.dumps(value)
    for _ in range(encodings):
        text = json.dumps(text)
    check(text)
    json.loads(redact(text))


def test_deep_json_is_redacted_as_text() -> None:
    text = "[" * 100_000 + '"token=abc"' + "]" * 100_000
    assert redact(text) == "[" * 100_000 + f'"token={REDACTED}"' + "]" * 100_000
    nested = '{"a": ' * 300 + '"token=abc"' + "}" * 300
    assert redact(nested) == '{"a": ' * 300 + f'"token={REDACTED}"' + "}" * 300


async def test_large_records_are_redacted_off_the_event_loop() -> None:
    sink = MemorySink()
    small = Record("tool_result", result="token=abc")
    big = Record("tool_result", result="token=abc " + "x " * (8 * OFFLOAD_CHARS))
    done: list[str] = []

    async def record(name: str, record: Record) -> None:
        await sink.record(record)
        done.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(record, "small", small)
        await trio.testing.wait_all_tasks_blocked()
        assert done == ["small"]  # redacted inline: no checkpoint on the way
        nursery.start_soon(record, "big", big)
        await trio.testing.wait_all_tasks_blocked()
        assert done == ["small"]  # parked while a worker thread redacts it
    assert done == ["small", "big"]
    assert [e.result[:16] for e in sink.entries if e.result] == [f"token={REDACTED}"] * 2
