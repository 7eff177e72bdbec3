"""An entry's canonical body built straight from a recorder's fields (pure, no I/O).

The hot path of a file sink's ``record_fields_nowait``: no :class:`Record` and no
:class:`Entry` is built for an entry whose fields are all of the exact types the
encoder takes without question; the fields are redacted as
:func:`ledger._redact.redact_record` redacts a record (the same functions, field
by field) and encoded as :func:`ledger._encoding.canonical_body` encodes one, so
the body, and so the line and its hash, are byte for byte those of the
``Record`` path. Any other record (a field of another type, a str subclass, an
int duration, data that is not a plain dict) is not plain: the sink builds it
into a ``Record`` and takes the ``Record`` path, with its checks and errors.
"""

from __future__ import annotations

import json.encoder
from collections.abc import Mapping
from math import isfinite
from types import MappingProxyType
from typing import Any, Final

import msgspec

from ._encoding import _BIG_INT_BITS, _data_json, sorted_json
from ._entry import Scalar
from ._keys import NONE, key_class
from ._offload import OFFLOAD_CHARS
from ._redact import CLEAN_TEXTS, all_clean, redact_data, redact_name, redact_text

NOT_PLAIN: Final = ""
"""What :func:`fields_body` returns for fields that are not plain (no body is empty)."""

LARGE: Final = "large"
"""What :func:`fields_body` returns for fields of more than ``OFFLOAD_CHARS`` of
text (redacted in a worker thread: only the awaited path takes them)."""

_quote = json.encoder.encode_basestring
_INT_MAX: Final = 1 << _BIG_INT_BITS
_INT_MIN: Final = -_INT_MAX


def _text(value: str | None) -> str:
    # A text field redacted and quoted (an empty one cannot hold a secret).
    if value is None:
        return "null"
    return _quote(redact_text(value)) if value else '""'


def fields_body(
    seq: int, time: str, prev: str,
    kind: str, run_id: str, path: tuple[str, ...], agent_id: str,
    tool: str | None, call_id: str | None, arguments: str | None, verdict: str | None,
    reason: str | None, result: str | None, error: str | None,
    duration: float | None, data: Mapping[str, Scalar] | None,
) -> str:
    """The canonical body of entry ``seq`` (time ``time``, after ``prev``) of these
    fields, redacted; :data:`NOT_PLAIN` or :data:`LARGE` (nothing encoded) when the
    fields are not plain or too large. Never raises for any argument. Not a checkpoint.
    """
    # The plain checks: those of check_content and of Record's data, in one pass.
    if (
        type(kind) is not str or not kind
        or type(run_id) is not str
        or type(agent_id) is not str
        or (verdict is not None and type(verdict) is not str)
        or (duration is not None and (type(duration) is not float or not isfinite(duration)))
        or type(path) is not tuple
    ):
        return NOT_PLAIN
    for seg in path:
        if type(seg) is not str:
            return NOT_PLAIN
    # Each optional text: None, or an exact str, counted.
    size = 0
    for text in (tool, call_id, arguments, reason, result, error):
        if text is not None:
            if type(text) is not str:
                return NOT_PLAIN
            size += len(text)
    if data:
        if type(data) is not dict and type(data) is not MappingProxyType:
            return NOT_PLAIN
        value: Any
        for key, value in data.items():
            kind_of = type(value)
            if type(key) is not str:
                return NOT_PLAIN
            if kind_of is str:
                size += len(value)
            elif kind_of is int:
                if not _INT_MIN < value < _INT_MAX:
                    return NOT_PLAIN
            elif kind_of is float:
                if not isfinite(value):
                    return NOT_PLAIN
            elif kind_of is not bool and value is not None:
                return NOT_PLAIN
    if size > OFFLOAD_CHARS:
        return LARGE
    # Redaction, as redact_record does it: the tool name and call id through the
    # cache of names, every other text, and data; kind, ids, path and verdict are
    # the recorder's own, never redacted (as in redact_record). An empty text
    # cannot hold a secret.
    q = _quote
    if data:
        data = redact_data(data) or data  # a dict, or the caller's own
        data_text = _data_json(data)
    else:
        data_text = "{}"
    arguments_text = _text(arguments)
    reason_text = _text(reason)
    result_text = _text(result)
    error_text = _text(error)
    return (
        f'{{"agent_id":{q(agent_id)}'
        f',"arguments":{arguments_text}'
        f',"call_id":{"null" if call_id is None else q(redact_name(call_id))}'
        f',"data":{data_text}'
        f',"duration":{"null" if duration is None else float.__repr__(duration)}'
        f',"error":{error_text}'
        f',"kind":{q(kind)}'
        f',"path":[{q(path[0]) if len(path) == 1 else ",".join(map(q, path))}]'
        f',"prev_hash":"{prev}"'
        f',"reason":{reason_text}'
        f',"result":{result_text}'
        f',"run_id":{q(run_id)}'
        f',"seq":{int.__repr__(seq)}'
        f',"time":{q(time)}'
        f',"tool":{"null" if tool is None else q(redact_name(tool))}'
        f',"verdict":{"null" if verdict is None else q(verdict)}}}'
    )



class _Body(msgspec.Struct, gc=False):
    """An entry's body for msgspec: its fields in sorted order, as they are encoded."""

    agent_id: str
    arguments: str | None
    call_id: str | None
    data: Any
    duration: float | None
    error: str | None
    kind: str
    path: tuple[str, ...]
    prev_hash: str
    reason: str | None
    result: str | None
    run_id: str
    seq: int
    time: str
    tool: str | None
    verdict: str | None


# The struct's fields are in sorted order already: only data's keys need sorting.
_encode: Final = msgspec.json.Encoder().encode
_encode_sorted: Final = msgspec.json.Encoder(order="sorted").encode
# A float msgspec spells as float.__repr__ does: repr switches to an exponent
# ("1e+16", "1e-05") outside [1e-4, 1e16), where msgspec writes "1e16", "1e-5".
_FIXED_MIN: Final = 1e-4
_FIXED_MAX: Final = 1e16


def _spelled_alike() -> bool:
    # Whether this msgspec spells what the fast path gives it as json.dumps does
    # (checked once at import; the tests prove it over any input for the msgspec
    # they run with): if not, every entry takes fields_body.
    probe = [
        -0.0, 0.0, 1e-4, 0.1, 1.5, 9999999999999998.0, 123456789.125, 2**64, -(2**63),
        "\x00\x1f\x7f\"\\/\b\f\n\r\t\u2028\u00e9\U0001f600", True, None,
    ]
    # Keys in code point order, not UTF-16's (past the BMP after U+FFFF), a prefix
    # before its extensions.
    data = {"b": probe, "a": 1, "\u00e9": 2, "B": 3, "\U0001f600": 4, "\uffff": 5,
            "\ue000": 6, "a\x00": 7, "a\x00b": 8}
    fields: list[Any] = [
        "a", None, "c", data, 0.5, None, "k", ("p",), "0", "r", "", "i", 1, "t", None, "v",
    ]
    body = dict(zip(_Body.__struct_fields__, fields, strict=True))
    make: Any = _Body
    empty = [*fields[:3], {}, *fields[4:]]
    try:
        return (
            _encode_sorted(make(*fields)) == sorted_json(body).encode()
            and _encode(make(*empty)) == sorted_json({**body, "data": {}}).encode()
        )
    except Exception:  # a msgspec that refuses a probe (an int past 64 bits, say)
        return False


SPELLED_ALIKE: Final = _spelled_alike()
"""Whether msgspec encodes the common entry (see :func:`fields_bytes`) byte for byte
as the canonical encoding does; if not, :func:`fields_bytes` takes :func:`fields_body`
for every entry."""
_CLEAN_KEYS: dict[tuple[str, ...], bool] = {}
_MAX_CLEAN_KEYS: Final = 4096
_MAX_CLEAN_KEY_CHARS: Final = 512


def _clean_keys(keys: tuple[str, ...]) -> bool:
    # Whether no key of data names a credential (cached per tuple of keys, up to
    # _MAX_CLEAN_KEYS of them, each of at most _MAX_CLEAN_KEY_CHARS characters in
    # all: a recorder's data has a few fixed sets of short labels; longer keys are
    # classified again, never kept after their entry).
    clean = all(key_class(key) == NONE for key in keys)
    if len(_CLEAN_KEYS) < _MAX_CLEAN_KEYS and sum(map(len, keys)) <= _MAX_CLEAN_KEY_CHARS:
        _CLEAN_KEYS[keys] = clean
    return clean


def fields_bytes(
    seq: int, time: str, prev: str,
    kind: str, run_id: str, path: tuple[str, ...], agent_id: str,
    tool: str | None, call_id: str | None, arguments: str | None, verdict: str | None,
    reason: str | None, result: str | None, error: str | None,
    duration: float | None, data: Mapping[str, Scalar] | None,
) -> bytes | str:
    """:func:`fields_body` encoded (UTF-8, lone surrogates passed through): the same
    bytes, or :data:`NOT_PLAIN` or :data:`LARGE` as it returns them. Never raises
    for any argument. Not a checkpoint.

    The common entry (nothing to redact, every float spelled alike) is encoded in
    one C call (msgspec); any other takes :func:`fields_body`.
    """
    if (
        type(kind) is not str or not kind
        or type(run_id) is not str
        or type(agent_id) is not str
        or (verdict is not None and type(verdict) is not str)
        or type(path) is not tuple
    ):
        return NOT_PLAIN
    fast = SPELLED_ALIKE
    if duration is not None:
        if type(duration) is not float or not isfinite(duration):
            return NOT_PLAIN
        if not (_FIXED_MIN <= abs(duration) < _FIXED_MAX or duration == 0.0):
            fast = False
    for seg in path:
        if type(seg) is not str:
            return NOT_PLAIN
    # Each text: None, or an exact str, counted; those not known clean are searched.
    unknown = []
    size = 0
    for text in (tool, call_id, arguments, reason, result, error):
        if text is not None:
            if type(text) is not str:
                return NOT_PLAIN
            size += len(text)
            if text not in CLEAN_TEXTS:
                unknown.append(text)
    if data:
        if type(data) is not dict:
            fast = False
            if type(data) is not MappingProxyType:
                return NOT_PLAIN
        value: Any
        for key, value in data.items():
            kind_of = type(value)
            if type(key) is not str:
                return NOT_PLAIN
            if kind_of is str:
                size += len(value)
                if value not in CLEAN_TEXTS:
                    unknown.append(value)
            elif kind_of is int:
                if not _INT_MIN < value < _INT_MAX:
                    return NOT_PLAIN
            elif kind_of is float:
                if not isfinite(value):
                    return NOT_PLAIN
                if not (_FIXED_MIN <= abs(value) < _FIXED_MAX or value == 0.0):
                    fast = False
            elif kind_of is not bool and value is not None:
                return NOT_PLAIN
        if fast:
            keys = tuple(data)
            clean = _CLEAN_KEYS.get(keys)
            fast = _clean_keys(keys) if clean is None else clean
    if size > OFFLOAD_CHARS:
        return LARGE
    if unknown and fast:
        fast = all_clean(unknown)
    if fast:
        try:
            if data:
                return _encode_sorted(_Body(
                    agent_id, arguments, call_id, data, duration, error, kind, path, prev,
                    reason, result, run_id, seq, time, tool, verdict,
                ))
            return _encode(_Body(
                agent_id, arguments, call_id, _EMPTY, duration, error, kind, path, prev,
                reason, result, run_id, seq, time, tool, verdict,
            ))
        except UnicodeEncodeError:  # a lone surrogate: encoded with surrogatepass below
            pass
    return _slow(seq, time, prev, kind, run_id, path, agent_id, tool, call_id,
                 arguments, verdict, reason, result, error, duration, data)


_EMPTY: Final[dict[str, Scalar]] = {}



def _slow(
    seq: int, time: str, prev: str,
    kind: str, run_id: str, path: tuple[str, ...], agent_id: str,
    tool: str | None, call_id: str | None, arguments: str | None, verdict: str | None,
    reason: str | None, result: str | None, error: str | None,
    duration: float | None, data: Mapping[str, Scalar] | None,
) -> bytes | str:
    body = fields_body(seq, time, prev, kind, run_id, path, agent_id, tool, call_id,
                       arguments, verdict, reason, result, error, duration, data)
    if body is NOT_PLAIN or body is LARGE:
        return body
    return body.encode("utf-8", "surrogatepass")
