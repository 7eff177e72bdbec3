from __future__ import annotations

import hashlib
import json
import math

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger import Chain, Entry, EntryKind, Record
from ledger._encoding import FIELDS, entry_to_dict
from ledger.encoding import GENESIS, canonical_body, decode_line, encode_entry, entry_hash

from ._helpers import TIME, chain_of, records


def reference_body(entry: Entry) -> str:
    fields = entry_to_dict(entry)
    del fields["hash"]
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.slow
@given(st.lists(records, min_size=1, max_size=5))
def test_canonical_body_is_sorted_compact_json(recs: list[Record]) -> None:
    for entry in chain_of(recs):
        assert canonical_body(entry.seq, entry.time, entry, entry.prev_hash) == reference_body(
            entry
        )


@pytest.mark.slow
@given(st.lists(records, min_size=1, max_size=5))
def test_lines_round_trip(recs: list[Record]) -> None:
    for entry in chain_of(recs):
        line = encode_entry(entry)
        assert decode_line(line) == entry
        assert decode_line(f"{line}\n".encode()) == entry
        assert entry_hash(decode_line(line)) == entry.hash


def test_first_entry_exact_encoding_and_hash() -> None:
    entry, body = Chain().link(
        Record(EntryKind.tool_request, "r1", ("root/0001",), "jess", tool="ls", call_id="c1"),
        TIME,
    )
    assert body == (
        '{"agent_id":"jess","arguments":null,"call_id":"c1","data":{},"duration":null,'
        '"error":null,"kind":"tool_request","path":["root/0001"],'
        f'"prev_hash":"{GENESIS}","reason":null,"result":null,"run_id":"r1","seq":1,'
        f'"time":"{TIME}","tool":"ls","verdict":null}}'
    )
    assert entry.hash == hashlib.sha256(body.encode()).hexdigest()
    assert entry.hash == entry_hash(entry)
    assert encode_entry(entry) == f'{body[:-1]},"hash":"{entry.hash}"}}'


def test_chain_links_and_counts() -> None:
    first, second = chain_of([Record("prompt"), Record("run_end", data={"turns": 2})])
    assert (first.seq, first.prev_hash) == (1, GENESIS)
    assert (second.seq, second.prev_hash) == (2, first.hash)
    assert dict(second.data) == {"turns": 2}


def test_non_ascii_and_surrogates_encode() -> None:
    [entry] = chain_of([Record("prompt", arguments="héllo \u2028 \ud800 ☃")])
    line = encode_entry(entry)
    assert "héllo" in line
    assert decode_line(line.encode("utf-8", "surrogatepass")) == entry


def test_non_finite_numbers_are_refused() -> None:
    chain = Chain()
    with pytest.raises(ValueError, match=r"^an entry's duration must be finite, not inf$"):
        chain.link(Record("tool_result", duration=math.inf), TIME)
    assert chain.seq == 0
    with pytest.raises(ValueError, match=r"^entry data value for 'x' must be finite, not nan$"):
        Record("run_end", data={"x": math.nan})


def test_record_freezes_data_and_path() -> None:
    data = {"turns": 1}
    record = Record("run_end", path=["a/0001"], data=data)
    data["turns"] = 2
    assert record.path == ("a/0001",)
    assert dict(record.data) == {"turns": 1}
    with pytest.raises(TypeError):
        record.data["turns"] = 3  # type: ignore[index]


def test_record_rejects_non_scalar_data() -> None:
    with pytest.raises(TypeError) as info:
        Record("run_end", data={"tokens": [1, 2]})  # type: ignore[dict-item]
    assert str(info.value) == (
        "entry data value for 'tokens' must be str, int, float, bool or None, not list"
    )


def test_empty_kind_is_rejected_and_chain_unchanged() -> None:
    chain = Chain()
    with pytest.raises(ValueError, match=r"^an entry's kind must be a non-empty string$"):
        chain.link(Record(""), TIME)
    assert (chain.seq, chain.head) == (0, GENESIS)


def _line(**changes: object) -> str:
    [entry] = chain_of([Record("prompt")])
    fields = entry_to_dict(entry)
    fields.update(changes)
    return json.dumps({k: v for k, v in fields.items() if v is not ...})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{", "not valid JSON"),
        ("[1]", "not a JSON object"),
        (_line(hash=...), "missing field 'hash'"),
        (_line(extra=1), "unknown field 'extra'"),
        (_line(seq="1"), "field 'seq' is not an integer"),
        (_line(seq=True), "field 'seq' is not an integer"),
        (_line(kind=None), "field 'kind' is not a string"),
        (_line(tool=3), "field 'tool' is not a string or null"),
        (_line(path="a"), "field 'path' is not a list of strings"),
        (_line(duration="1"), "field 'duration' is not a number or null"),
        (_line(data={"a": [1]}), "field 'data' is not an object of scalars"),
    ],
)
def test_decode_errors_say_why(line: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        decode_line(line)
    assert str(info.value) == message


def test_fields_match_entry_class() -> None:
    assert tuple(a.name for a in attrs.fields(Entry)) == FIELDS
