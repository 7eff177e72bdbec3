"""Redaction: secrets never reach the ledger (pure, no I/O).

:func:`redact` replaces every secret in a text with ``[REDACTED]``:

* the secret shapes of :mod:`ledger._shapes` (API keys of OpenAI, Anthropic,
  Stripe, GitHub, GitLab, Hugging Face, Slack, Google, AWS; JSON web tokens,
  ``Bearer`` tokens, PEM private keys, URL passwords, ``mysql -p...``, and
  base64 that decodes to any of them), wherever they appear;
* the values of keys named like a credential (:mod:`ledger._keys`), in
  ``key=value`` and ``key: value`` pairs, to the end of the line for
  ``Authorization`` headers and passwords;
* in text that parses as JSON (an object, an array or a string), every member
  name and string value after decoding, recursively for strings that are
  themselves JSON (:data:`MAX_JSON_DEPTH` levels), with values of credential
  keys replaced whole; the JSON is re-encoded only when something changed;
* in other text, ``\\uXXXX`` and ``\\xXX`` escapes are decoded before the
  search (``s\\u006b-proj-...`` is a key) and the escaped span is replaced.

Guarantees: :func:`redact` never raises for any str, costs O(n) (every
pattern is linear; JSON is decoded to :data:`MAX_JSON_DEPTH` levels of JSON in
strings and 200 levels of nesting, deeper JSON is scanned as text), is
idempotent (``redact(redact(x)) == redact(x)``: a text is redacted again, at
most three passes, until a pass changes nothing) and returns ``value`` itself
when nothing was redacted. The output is at most ``10 * len(value) + 10``
characters long (a one-character secret becomes ``[REDACTED]``). Text that
holds no candidate (a credential word, ``://``, an escape, or a run of 15
base64 characters) is returned after one or two regular-expression searches.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

from ._encoding import check_content
from ._entry import Record, Scalar
from ._keys import KEYISH, NONE, is_kept, key_class, pair_spans
from ._shapes import Span, looks_secret, shape_spans

REDACTED: Final = "[REDACTED]"
"""What a redacted value is replaced with."""

MAX_JSON_DEPTH: Final = 4
"""How many levels of JSON text inside JSON strings are decoded and scanned."""

_MAX_NESTING: Final = 200  # arrays and objects within one JSON text

# The prefilter: text holds a secret only if it holds one of these words (in any
# case), or a run of 15 base64 characters (every key shape has one; base64 of a
# key too). Text with neither is returned after two searches.
_CANDIDATE_RE: Final = re.compile(
    r"a(?:uth)|bearer|c(?:ookie|redential|onnection)|dsn|eyj|key|m(?:ysql|ariadb)"
    r"|p(?:ass[wp]|wd)|secret|token|ur[il]|://|\\[ux]"
)
_RUN: Final = re.compile(r"[A-Za-z0-9+/_-]{15}")
_ANY_CANDIDATE: Final = re.compile(_CANDIDATE_RE.pattern + r"|[a-z0-9+/_-]{15}")
_ESCAPE: Final = re.compile(r"\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}")


class _TooDeep(Exception):
    """JSON nested deeper than :data:`_MAX_NESTING`: redacted as text instead."""


def _merge(spans: list[Span]) -> list[Span]:
    spans.sort()
    merged: list[Span] = []
    for start, end in spans:
        if start >= end:
            continue
        if merged and start < merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _replace(text: str, spans: list[Span]) -> str:
    parts: list[str] = []
    done = 0
    for start, end in spans:
        parts.append(text[done:start])
        parts.append(REDACTED)
        done = end
    parts.append(text[done:])
    return "".join(parts)


def _unescaped(text: str) -> tuple[str, list[int], list[int], list[int]] | None:
    """Decode ``\\uXXXX``/``\\xXX``; return the text and where each escape was and went."""
    parts: list[str] = []
    decoded_at: list[int] = []
    source_at: list[int] = []
    widths: list[int] = []
    done = 0
    size = 0
    for m in _ESCAPE.finditer(text):
        parts.append(text[done : m.start()])
        size += m.start() - done
        decoded_at.append(size)
        source_at.append(m.start())
        widths.append(m.end() - m.start())
        parts.append(chr(int(m[0][2:], 16)))
        size += 1
        done = m.end()
    if not decoded_at:
        return None
    parts.append(text[done:])
    return "".join(parts), decoded_at, source_at, widths


def _text_spans(text: str) -> list[Span]:
    """The merged spans to hide in ``text`` (after decoding its escapes)."""
    view = _unescaped(text) if "\\" in text else None
    if view is None:
        return _merge(pair_spans(text) + shape_spans(text))
    decoded, decoded_at, source_at, widths = view

    def source(i: int) -> tuple[int, int]:
        """Where decoded character ``i`` starts in ``text``, and how wide it is there."""
        k = bisect.bisect_right(decoded_at, i) - 1
        if k < 0:
            return i, 1
        if decoded_at[k] == i:
            return source_at[k], widths[k]
        return source_at[k] + widths[k] + (i - decoded_at[k] - 1), 1

    spans = []
    for start, end in _merge(pair_spans(decoded) + shape_spans(decoded)):
        last, width = source(end - 1)
        spans.append((source(start)[0], last + width))
    return spans


def _looks_json(text: str) -> bool:
    return text.lstrip()[:1] in ('{', '[', '"')


def _redact(value: str, depth: int) -> str:
    if _CANDIDATE_RE.search(value.lower()) is None and (
        len(value) < 15 or _RUN.search(value) is None
    ):
        return value
    if depth < MAX_JSON_DEPTH and _looks_json(value):
        redacted = _redact_json(value, depth)
        if redacted is not None:
            return redacted
    # A span that is already the marker ("mysql -p[REDACTED]") is left alone, so
    # that text is returned as is when nothing new was found.
    size = len(REDACTED)
    spans = [
        (start, end)
        for start, end in _text_spans(value)
        if end - start != size or value[start:end] != REDACTED
    ]
    return _replace(value, spans) if spans else value


_MAX_PASSES: Final = 3


def _settled(value: str) -> str:
    """``value`` redacted until another pass changes nothing (at most three passes).

    A redaction can change what is around a secret (a key run into a PEM block
    is a key of its own once the block is gone): another pass finds it.
    """
    if _CANDIDATE_RE.search(value.lower()) is None and (
        len(value) < 15 or _RUN.search(value) is None
    ):
        return value  # the prefilter of _redact, without a call: most texts stop here
    out = _redact(value, 0)
    passes = 1
    while out is not value and passes < _MAX_PASSES:
        value, out = out, _redact(out, 0)
        passes += 1
    return out


def _hides(cls: int, value: object) -> bool:
    """Whether the value of a key of class ``cls`` is redacted whole."""
    if cls == NONE or value is None or isinstance(value, bool):
        return False
    if cls == KEYISH:
        return isinstance(value, str) and looks_secret(value)
    return not (isinstance(value, str) and is_kept(value))


def _walk(value: object, depth: int, nesting: int) -> object:
    """``value`` redacted (the same object when nothing changed)."""
    if isinstance(value, str):
        return _redact(value, depth + 1)
    if nesting >= _MAX_NESTING:
        raise _TooDeep
    if isinstance(value, list):
        items = [_walk(item, depth, nesting + 1) for item in value]
        changed = any(new is not old for new, old in zip(items, value, strict=True))
        return items if changed else value
    if isinstance(value, dict):
        out: dict[str, object] = {}
        changed = False
        for key, item in value.items():
            new_key = _redact(key, MAX_JSON_DEPTH)
            new = REDACTED if _hides(key_class(new_key), item) else _walk(item, depth, nesting + 1)
            if new_key in out:  # two redacted names: keep both members
                n = 2
                while f"{new_key}#{n}" in out:
                    n += 1
                new_key = f"{new_key}#{n}"
            out[new_key] = new
            changed = changed or new is not item or new_key != key
        return out if changed else value
    return value


def _redact_json(value: str, depth: int) -> str | None:
    """Redact JSON text; ``None`` if ``value`` is not JSON or is nested too deeply."""
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, str | list | dict):
        return None
    try:
        cleaned = _walk(parsed, depth, 0)
    except (_TooDeep, RecursionError):
        return None
    if cleaned is parsed:
        return value
    return json.dumps(cleaned, ensure_ascii=False)


def redact(value: str) -> str:
    """Return ``value`` with every secret it holds replaced by ``[REDACTED]``.

    Pure, O(n), idempotent, and never raises for any str; returns ``value``
    itself when nothing was redacted. JSON text (an object, an array or a
    string) is redacted after decoding and re-encoded only when something was
    redacted. A str subclass is redacted as the str it holds, and returned as
    a str (its own ``lower()`` or ``__len__`` could hide a secret).
    """
    if type(value) is not str and isinstance(value, str):
        value = str.__str__(value)
    return _settled(value)


_MAX_CACHED_NAME: Final = 128


@functools.lru_cache(maxsize=1024)
def _redact_cached(name: str) -> str:
    return _settled(name)


def _redact_name(name: str) -> str:
    """Redact a tool name or call id (chosen by the model).

    Cached: the same name and id come back on every entry of a tool call.
    """
    if len(name) > _MAX_CACHED_NAME:
        return _settled(name)
    redacted = _redact_cached(name)
    return name if redacted == name else redacted


def _redact_data(data: Mapping[str, Scalar]) -> Mapping[str, Scalar] | None:
    """Return a redacted copy of ``data``, or ``None`` if nothing changed."""
    # Keys are the recorder's own labels; values may come from outside. Inlined,
    # and no copy unless a value changes: data holds a few counters and labels
    # on every entry, and almost never a secret.
    clean: dict[str, Scalar] | None = None
    for key, value in data.items():
        if value is None or value is True or value is False:
            continue
        cls = key_class(key)
        new: Scalar
        if cls != NONE and _hides(cls, value):
            new = REDACTED
        elif type(value) is str:
            new = _settled(value)
        else:
            continue
        if new is not value:
            if clean is None:
                clean = dict(data)
            clean[key] = new
    return clean


CLEAN_TEXTS: Final[set[str]] = set()
"""Texts that :func:`redact_text` returns as they are, found by :func:`all_clean`:
short ones (at most :data:`_MAX_CLEAN_CHARS` characters, at most
:data:`_MAX_CLEAN_TEXTS` of them; emptied when full). Read it with ``in`` only."""

_MAX_CLEAN_CHARS: Final = 128
_MAX_CLEAN_TEXTS: Final = 1024


def all_clean(texts: list[str]) -> bool:
    """Whether :func:`redact_text` returns each of ``texts`` (exact strs) as it is, by
    its prefilter in one search; if so, the short ones join :data:`CLEAN_TEXTS`.
    False means only that one of them may hold a secret. Not a checkpoint.

    The texts are searched joined by ``"\\x00"``, lowered: the separator is in no
    candidate word nor in a base64 run, and lowering keeps every ASCII letter,
    digit and ``+/_-``, so a text with a candidate word or a run of 15 base64
    characters gives a match in the whole.
    """
    joined = texts[0] if len(texts) == 1 else "\x00".join(texts)
    if _ANY_CANDIDATE.search(joined.lower()) is not None:
        return False
    if len(CLEAN_TEXTS) + len(texts) > _MAX_CLEAN_TEXTS:
        CLEAN_TEXTS.clear()
    for text in texts:
        if len(text) <= _MAX_CLEAN_CHARS:
            CLEAN_TEXTS.add(text)
    return True


redact_text: Final = _settled
"""A text field (arguments, result, error, reason) of an exact str, redacted as
:func:`redact_record` redacts it (``value`` itself when nothing changed)."""

redact_name: Final = _redact_name
"""A tool name or call id of an exact str, redacted as :func:`redact_record` does it."""

redact_data: Final = _redact_data
"""``data`` redacted as :func:`redact_record` does it: a copy, or ``None`` if unchanged."""


def redact_record(record: Record) -> Record:
    """Return ``record`` with its text fields, tool name, call id and ``data`` redacted.

    Returns ``record`` itself when it holds nothing to redact. O(n) in the
    record's size; not a checkpoint (the sinks redact records of more than
    64 KiB in a worker thread). A text field of a str subclass is redacted as
    the str it holds, and kept as that str: the redactor never calls a method
    of the subclass (a ``lower()`` or ``__len__`` of its own could hide a secret).

    Raises:
      TypeError: A text field, the tool name or the call id is not a str (the
        error :func:`ledger.check_content` gives for it, which names the field).
    """
    r = record
    for text in (r.tool, r.call_id, r.arguments, r.result, r.error, r.reason):
        if text is not None and type(text) is not str:
            return redact_record(_exact_texts(r))
    tool = r.tool if r.tool is None else _redact_name(r.tool)
    call_id = r.call_id if r.call_id is None else _redact_name(r.call_id)
    arguments, result, error, reason = r.arguments, r.result, r.error, r.reason
    if arguments is not None:
        arguments = _settled(arguments)
    if result is not None:
        result = _settled(result)
    if error is not None:
        error = _settled(error)
    if reason is not None:
        reason = _settled(reason)
    data = _redact_data(r.data) if r.data else None
    if (
        data is None
        and tool is r.tool
        and call_id is r.call_id
        and arguments is r.arguments
        and result is r.result
        and error is r.error
        and reason is r.reason
    ):
        return record
    return attrs.evolve(
        record,
        tool=tool,
        call_id=call_id,
        arguments=arguments,
        result=result,
        error=error,
        reason=reason,
        data=r.data if data is None else data,
    )


def _exact_texts(record: Record) -> Record:
    # record with every text field, tool name and call id of a str subclass copied
    # as the str it holds (str.__str__ of a subclass makes that copy without
    # calling the subclass). Raises the encoder's TypeError for one that is no str.
    r = record
    texts: dict[str, Any] = {}
    for name, text in (
        ("tool", r.tool), ("call_id", r.call_id), ("arguments", r.arguments),
        ("result", r.result), ("error", r.error), ("reason", r.reason),
    ):
        if text is not None and type(text) is not str:
            if not isinstance(text, str):
                check_content(r)  # raises the encoder's TypeError, naming the field
            texts[name] = str.__str__(text)
    return attrs.evolve(r, **texts)
