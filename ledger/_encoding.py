"""The canonical encoding of entries and their hashes.

The canonical encoding of an entry is the JSON object of every field but
``hash``, keys sorted, no whitespace, non-ASCII characters kept (not
escaped), encoded as UTF-8: exactly what ``json.dumps(fields, sort_keys=True,
separators=(",", ":"), ensure_ascii=False)`` produces. Its SHA-256, in hex,
is the entry's ``hash``. A ledger line (JSONL) is that object with
``"hash"`` appended as its last member.

The encoder below builds that text by hand because it is on the hot path of
every record; the tests check it against ``json.dumps``.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import math
from collections.abc import Mapping
from typing import Any, Final, Protocol

from ._entry import Entry, Scalar, freeze_data

GENESIS: Final = "0" * 64
"""The ``prev_hash`` of the first entry of every chain."""

FIELDS: Final = (
    "seq",
    "time",
    "kind",
    "run_id",
    "path",
    "agent_id",
    "tool",
    "call_id",
    "arguments",
    "verdict",
    "reason",
    "result",
    "error",
    "duration",
    "data",
    "prev_hash",
    "hash",
)
"""Every field of a recorded entry, in :class:`Entry` order."""

_KEYS: Final = frozenset(FIELDS)
_OPTIONAL_TEXT: Final = ("tool", "call_id", "arguments", "verdict", "reason", "result", "error")
_TEXT: Final = ("time", "kind", "run_id", "agent_id", "prev_hash", "hash")

_quote = json.encoder.encode_basestring
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_SORTED_JSON: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def _pysorted_json(value: object) -> str:
    return _SORTED_JSON.encode(value)


if _c_make_encoder is not None:
    _c_sorted = _c_make_encoder(
        None, _SORTED_JSON.default, _quote, None, ":", ",", True, False, False
    )

    def sorted_json(value: object) -> str:
        """Return ``value`` as canonical JSON text (sorted keys, no whitespace)."""
        return "".join(_c_sorted(value, 0))

else:  # pragma: no cover - interpreters without the C accelerator
    sorted_json = _pysorted_json


class Content(Protocol):
    """The content fields shared by :class:`Record` and :class:`Entry`."""

    @property
    def kind(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    @property
    def path(self) -> tuple[str, ...]: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def tool(self) -> str | None: ...
    @property
    def call_id(self) -> str | None: ...
    @property
    def arguments(self) -> str | None: ...
    @property
    def verdict(self) -> str | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def result(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def duration(self) -> float | None: ...
    @property
    def data(self) -> Mapping[str, Scalar]: ...


def _number(value: float | None) -> str:
    if value is None:
        return "null"
    if type(value) is float and math.isfinite(value):
        return float.__repr__(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"an entry's duration must be finite, not {value!r}")
    return sorted_json(value)


def _data_json(data: Mapping[str, Scalar]) -> str:
    # sorted_json(dict(data)) by hand: a data mapping holds a few scalars, and this
    # skips the copy and the C encoder's per-call setup (about 1.5 us -> 1 us).
    q = _quote
    parts = []
    for key in sorted(data):
        if type(key) is not str:
            return sorted_json(dict(data))
        value = data[key]
        if type(value) is str:
            text = q(value)
        elif type(value) is int:
            text = int.__repr__(value)
        elif value is None:
            text = "null"
        elif type(value) is bool:
            text = "true" if value else "false"
        else:
            text = sorted_json(value)
        parts.append(f"{q(key)}:{text}")
    return "{" + ",".join(parts) + "}"


def canonical_body(seq: int, time: str, content: Content, prev_hash: str) -> str:
    """Return the canonical encoding (as text) of an entry's fields but ``hash``.

    Args:
      seq: The entry's sequence number.
      time: The entry's time.
      content: The entry's content (a :class:`Record` or an :class:`Entry`).
      prev_hash: The hash of the previous entry.

    Raises:
      TypeError: A field has a type the encoding does not allow.
      ValueError: ``duration`` is not finite.
    """
    q = _quote
    c = content
    data = c.data
    duration = c.duration
    path = c.path
    return (
        f'{{"agent_id":{q(c.agent_id)}'
        f',"arguments":{"null" if c.arguments is None else q(c.arguments)}'
        f',"call_id":{"null" if c.call_id is None else q(c.call_id)}'
        f',"data":{_data_json(data) if data else "{}"}'
        f',"duration":{"null" if duration is None else _number(duration)}'
        f',"error":{"null" if c.error is None else q(c.error)}'
        f',"kind":{q(c.kind)}'
        f',"path":[{q(path[0]) if len(path) == 1 else ",".join(map(q, path))}]'
        f',"prev_hash":{q(prev_hash)}'
        f',"reason":{"null" if c.reason is None else q(c.reason)}'
        f',"result":{"null" if c.result is None else q(c.result)}'
        f',"run_id":{q(c.run_id)}'
        f',"seq":{int.__repr__(seq)}'
        f',"time":{q(time)}'
        f',"tool":{"null" if c.tool is None else q(c.tool)}'
        f',"verdict":{"null" if c.verdict is None else q(c.verdict)}}}'
    )


_BIG_INT_BITS: Final = 4096
"""Ints wider than this are spelled out at check time: ``int.__repr__`` refuses
ints of more than ``sys.get_int_max_str_digits()`` digits (4,300 by default)."""


_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


def _check_int(value: int) -> None:
    # int.bit_length, not value.bit_length: an int subclass may override it.
    if int.bit_length(value) > _BIG_INT_BITS:
        int.__repr__(value)  # raises ValueError where the encoder would


def is_empty_kind(kind: object) -> bool:
    """Whether ``kind`` is empty (falsy): a str (subclass) by the str it holds, never by
    a ``__len__`` of its own, so that the check when a record is recorded and the one
    when it is chained (a MemorySink does both) cannot answer differently."""
    return not str.__len__(kind) if isinstance(kind, str) else not kind


def check_content(content: Content) -> None:
    """Raise now what :func:`canonical_body` would raise for ``content``.

    For sinks that encode later (:class:`ledger.MemorySink` chains on read): a
    record that cannot be encoded is refused when it is recorded, with the
    error the encoder gives, never when its entry is read. Stricter than the
    encoder in two ways: ``duration`` must be an int (not a bool) or a float (a
    value :func:`entry_from_dict` would not read back is refused here too), and
    an int of at most 64 bits (what a SQLite ledger can store).

    Raises:
      ValueError: ``kind`` is empty, ``duration`` is not finite or is an int of
        more than 64 bits, or an int in ``data`` is too wide to spell.
      TypeError: A field has a type the encoding does not allow.
    """
    # The common case in exact types first (about 0.5 us); anything else takes
    # the slow path, which says what is wrong or accepts str and int subclasses.
    c = content
    duration = c.duration
    if (
        type(c.kind) is str
        and c.kind
        and type(c.run_id) is str
        and type(c.agent_id) is str
        and (c.tool is None or type(c.tool) is str)
        and (c.call_id is None or type(c.call_id) is str)
        and (c.arguments is None or type(c.arguments) is str)
        and (c.verdict is None or type(c.verdict) is str)
        and (c.reason is None or type(c.reason) is str)
        and (c.result is None or type(c.result) is str)
        and (c.error is None or type(c.error) is str)
        and (duration is None or (type(duration) is float and math.isfinite(duration)))
        and type(c.path) is tuple
    ):
        for seg in c.path:
            if type(seg) is not str:
                break
        else:
            if c.data:
                for value in c.data.values():
                    if type(value) is int and value.bit_length() > _BIG_INT_BITS:
                        int.__repr__(value)  # raises ValueError where the encoder would
            return
    _explain(c)


def _explain(c: Content) -> None:
    """The slow path of :func:`check_content`."""
    if is_empty_kind(c.kind):  # first, as Chain.link does it
        raise ValueError("an entry's kind must be a non-empty string")
    if not isinstance(c.kind, str):
        raise TypeError(f"an entry's kind must be a str, not {type(c.kind).__name__}")
    for name, value in (("run_id", c.run_id), ("agent_id", c.agent_id)):
        if not isinstance(value, str):
            raise TypeError(f"an entry's {name} must be a str, not {type(value).__name__}")
    for name in _OPTIONAL_TEXT:
        value = getattr(c, name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"an entry's {name} must be a str or None, not {type(value).__name__}")
    path = c.path
    if type(path) is not tuple or not all(isinstance(seg, str) for seg in path):
        raise TypeError("an entry's path must be a tuple of str")
    duration = c.duration
    if duration is not None:
        if isinstance(duration, float):
            if not math.isfinite(duration):
                raise ValueError(f"an entry's duration must be finite, not {duration!r}")
        elif isinstance(duration, int) and not isinstance(duration, bool):
            # A SQLite ledger stores it as an INTEGER: 64 bits (wider failed the
            # writer's whole group commit); more than any duration in seconds.
            if not _INT64_MIN <= int.__int__(duration) <= _INT64_MAX:
                raise ValueError(
                    "an entry's duration must be an int of at most 64 bits, not one of"
                    f" {int.bit_length(duration)} bits"
                )
        else:
            raise TypeError(
                f"an entry's duration must be a float, an int or None,"
                f" not {type(duration).__name__}"
            )
    for item in c.data.values():
        if isinstance(item, int):
            _check_int(item)


def hash_body(body: str) -> str:
    """Return the hex SHA-256 of a canonical body's UTF-8 encoding."""
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def entry_hash(entry: Entry) -> str:
    """Return the hash ``entry`` should carry, computed from its other fields."""
    return hash_body(canonical_body(entry.seq, entry.time, entry, entry.prev_hash))


def line_from_body(body: str, hash: str) -> str:
    """Return the ledger line (without newline) of an entry from its body and hash."""
    return f'{body[:-1]},"hash":"{hash}"}}'


def encode_entry(entry: Entry) -> str:
    """Return the ledger line of ``entry`` (JSON text, no newline)."""
    return line_from_body(canonical_body(entry.seq, entry.time, entry, entry.prev_hash), entry.hash)


def entry_to_dict(entry: Entry) -> dict[str, Any]:
    """Return ``entry`` as a plain JSON-ready dict (path as a list, data as a dict)."""
    return {
        name: (
            list(entry.path)
            if name == "path"
            else dict(entry.data)
            if name == "data"
            else getattr(entry, name)
        )
        for name in FIELDS
    }


def _fail(why: str) -> ValueError:
    return ValueError(why)


class _NotFinite(Exception):
    """``NaN``, ``Infinity`` or ``-Infinity`` in JSON text (Python's json accepts them)."""


def _refuse_constant(name: str) -> object:
    raise _NotFinite(name)


def parse_json(text: str) -> object:
    """Parse JSON text read from a ledger, refusing what no writer produces.

    Raises:
      ValueError: The text is not JSON, holds ``NaN`` or ``Infinity``, or is
        nested deeper than the interpreter can parse; the message says which.
    """
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except _NotFinite as exc:
        raise _fail(f"it holds {exc.args[0]}, a number no ledger writer produces") from None
    except RecursionError:
        raise _fail("not valid JSON: nested too deeply") from None
    except ValueError:
        raise _fail("not valid JSON") from None


def _finite(value: object) -> bool:
    return type(value) is not float or math.isfinite(value)


def entry_from_dict(obj: object) -> Entry:
    """Build an :class:`Entry` from parsed JSON, checking every field's type.

    The hash is not checked here (see :func:`entry_hash`).

    Raises:
      ValueError: ``obj`` is not an entry; the message says why.
    """
    if not isinstance(obj, dict):
        raise _fail("not a JSON object")
    keys = obj.keys()
    if keys != _KEYS:
        missing = sorted(_KEYS - keys)
        if missing:
            raise _fail(f"missing field {missing[0]!r}")
        raise _fail(f"unknown field {_short(sorted(keys - _KEYS)[0])}")
    seq = obj["seq"]
    if type(seq) is not int:
        raise _fail("field 'seq' is not an integer")
    for name in _TEXT:
        if type(obj[name]) is not str:
            raise _fail(f"field {name!r} is not a string")
    for name in _OPTIONAL_TEXT:
        value = obj[name]
        if value is not None and type(value) is not str:
            raise _fail(f"field {name!r} is not a string or null")
    path = obj["path"]
    if type(path) is not list or not all(type(seg) is str for seg in path):
        raise _fail("field 'path' is not a list of strings")
    duration = obj["duration"]
    if duration is not None and type(duration) not in (int, float):
        raise _fail("field 'duration' is not a number or null")
    if not _finite(duration):
        raise _fail(f"field 'duration' is {duration!r}, a number no ledger writer produces")
    data = obj["data"]
    if type(data) is not dict or not all(
        v is None or type(v) in (str, int, float, bool) for v in data.values()
    ):
        raise _fail("field 'data' is not an object of scalars")
    for key, value in data.items():
        if not _finite(value):
            raise _fail(
                f"field 'data' holds {value!r} (at {_short(key)}), a number no ledger writer"
                " produces"
            )
    return Entry(
        seq=seq,
        time=obj["time"],
        kind=obj["kind"],
        run_id=obj["run_id"],
        path=tuple(path),
        agent_id=obj["agent_id"],
        tool=obj["tool"],
        call_id=obj["call_id"],
        arguments=obj["arguments"],
        verdict=obj["verdict"],
        reason=obj["reason"],
        result=obj["result"],
        error=obj["error"],
        duration=duration,
        data=freeze_data(data),
        prev_hash=obj["prev_hash"],
        hash=obj["hash"],
    )


def _short(name: str) -> str:
    """``name`` quoted for a message, cut to a few dozen characters (it is file content)."""
    return repr(name if len(name) <= 40 else name[:40] + "...")


def decode_line(line: bytes | str) -> Entry:
    """Parse one ledger line (with or without its newline) into an :class:`Entry`.

    Does not check that the line is the entry's canonical encoding (see
    :func:`ledger.verify`).

    Raises:
      ValueError: The line is not UTF-8, not JSON, or not an entry; the
        message says why.
    """
    if isinstance(line, bytes):
        try:
            text = line.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise _fail("not valid UTF-8") from None
    else:
        text = line
    return entry_from_dict(parse_json(text))
