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

from ._encoding import _BIG_INT_BITS, _data_json
from ._entry import Scalar
from ._offload import OFFLOAD_CHARS
from ._redact import redact_data, redact_name, redact_text

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
