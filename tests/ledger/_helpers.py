"""Shared test helpers for the ledger tests (not a conftest: no fixtures)."""

from __future__ import annotations

import os

from hypothesis import strategies as st

from ledger import Chain, Entry, Record
from ledger.encoding import encode_entry

TIME = "2025-01-02T03:04:05.678901Z"


def fixed_clock() -> str:
    return TIME


def chain_of(records: list[Record]) -> list[Entry]:
    chain = Chain()
    return [chain.link(record, TIME)[0] for record in records]


def jsonl_bytes(entries: list[Entry]) -> bytes:
    return b"".join(f"{encode_entry(e)}\n".encode() for e in entries)


texts = st.text(max_size=20)
optional_texts = st.none() | texts
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
records = st.builds(
    Record,
    kind=st.sampled_from(["prompt", "tool_request", "gate_decision", "tool_result", "run_end"]),
    run_id=texts,
    path=st.lists(st.text(min_size=1, max_size=8), max_size=3).map(tuple),
    agent_id=texts,
    tool=optional_texts,
    call_id=optional_texts,
    arguments=optional_texts,
    verdict=st.none() | st.sampled_from(["allow", "deny"]),
    reason=optional_texts,
    result=optional_texts,
    error=optional_texts,
    duration=st.none() | st.floats(min_value=0, max_value=1e6),
    data=st.dictionaries(st.text(max_size=8), scalars, max_size=3),
)


class Ticking:
    """A clock whose every reading is one second after the last, from midnight."""

    def __init__(self) -> None:
        self.readings = 0

    def __call__(self) -> str:
        self.readings += 1
        minutes, seconds = divmod(self.readings, 60)
        return f"2025-01-02T00:{minutes:02d}:{seconds:02d}.000000Z"


def exists(path: str | os.PathLike[str]) -> bool:
    return os.path.exists(path)
