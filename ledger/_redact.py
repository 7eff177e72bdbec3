"""Redaction: secrets never reach the ledger (pure, no I/O).

Two rules, applied to every text field a recorder hands over (arguments,
result, error, reason and string values of ``data``):

* values that look like credentials are replaced wherever they appear: API
  keys (``sk-...``, ``sk-ant-...``, ``ghp_...``, ``github_pat_...``,
  ``AKIA...``, ``xox?-...``), JSON web tokens, and ``Bearer`` tokens;
* values of keys named like a credential (``api_key``, ``authorization``,
  ``token``, ``secret``, ``password``, ...), and long hex or base64 values of
  keys named ``key``, are replaced whole. Text that parses as a JSON object
  or array is redacted by key and re-encoded; other text is searched for
  ``key=value`` and ``key: value`` pairs.

Text without any candidate substring is returned unchanged without running
a regular expression, so the common case costs a few hundred nanoseconds.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Mapping
from typing import Final

import attrs

from ._entry import Record, Scalar

REDACTED: Final = "[REDACTED]"
"""What a redacted value is replaced with."""

_CANDIDATES: Final = (
    "key",
    "token",
    "secret",
    "passw",
    "passp",
    "pwd",
    "auth",
    "bearer",
    "credential",
    "sk-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "akia",
    "asia",
    "xox",
    "eyj",
)

_SECRET_WORDS: Final = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "auth",
        "authorization",
        "apikey",
        "credential",
        "credentials",
        "privatekey",
        "accesskey",
        "secretkey",
        "accesstoken",
        "refreshtoken",
        "authtoken",
        "sessiontoken",
        "idtoken",
        "bearertoken",
        "clientsecret",
    }
)
# Words that make a key name a property of a credential, not the credential
# itself: "max_tokens", "token_count", "token_type", "password_length".
_ABOUT_WORDS: Final = frozenset(
    {
        "count",
        "counts",
        "limit",
        "limits",
        "usage",
        "budget",
        "max",
        "min",
        "num",
        "total",
        "used",
        "remaining",
        "size",
        "length",
        "type",
        "url",
        "uri",
        "endpoint",
        "expiry",
        "expires",
    }
)
_SECRET_PAIRS: Final = frozenset({("api", "key"), ("access", "key"), ("private", "key")})
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_NON_WORD = re.compile(r"[^a-z0-9]+")
_SECRET_LIKE = re.compile(r"[A-Za-z0-9+/=_-]{16,}")

_TOKEN_PATTERNS: Final = (
    re.compile(r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{12,}"),
    re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
)
# "Bearer" as HTTP writes it takes any token; other spellings need a token-like
# value, so that prose ("the bearer of bad news") survives.
_BEARER = re.compile(
    r"\b(Bearer\s+)[A-Za-z0-9._~+/=-]+"
    r"|\b((?i:bearer)\s+)(?=[A-Za-z0-9._~+/=-]{0,200}[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,}"
)
_KEY_SEP = re.compile(
    r"""(?<![A-Za-z0-9_])(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>["']?\s*[:=]\s*)"""
)
_VALUE = re.compile(
    r"""(?P<q>["'])(?P<qval>(?:\\.|(?!(?P=q))[^\\])*)(?P=q)"""
    r"""|(?P<val>(?:[Bb]earer\s+)?[^\s"',;&}\]]+)"""
)
_NOT_SECRETS: Final = frozenset({"", "null", "true", "false", "none", REDACTED})


@functools.lru_cache(maxsize=1024)
def _key_class(key: str) -> int:
    """Classify a key: 2 names a credential, 1 is named ``...key``, 0 is neither."""
    words = [w for w in _NON_WORD.split(_CAMEL.sub(r"\1_\2", key).lower()) if w]
    if not words or any(w in _ABOUT_WORDS for w in words):
        return 0
    if any(w in _SECRET_WORDS for w in words) or "".join(words) in _SECRET_WORDS:
        return 2
    if any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words)):
        return 2
    return 1 if words[-1] == "key" else 0


def _looks_secret(value: str) -> bool:
    return (
        _SECRET_LIKE.fullmatch(value) is not None
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


def _hides(key: str, value: object) -> bool:
    """Whether the value of ``key`` must be redacted whole."""
    if value is None or isinstance(value, bool):
        return False
    cls = _key_class(key)
    if cls == 2:
        return not (isinstance(value, str) and value.lower() in _NOT_SECRETS)
    return cls == 1 and isinstance(value, str) and _looks_secret(value)


# One search over the lowered text: about 5x faster than a loop over the candidates.
_CANDIDATE_RE = re.compile("|".join(map(re.escape, _CANDIDATES)))


def _has_candidate(value: str) -> bool:
    return _CANDIDATE_RE.search(value.lower()) is not None


def _walk(value: object) -> object:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_walk(item) for item in value]
    if isinstance(value, dict):
        return {key: REDACTED if _hides(key, item) else _walk(item) for key, item in value.items()}
    return value


def _redact_json(value: str) -> str | None:
    """Redact JSON text by key; ``None`` if ``value`` is not a JSON object or array."""
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, dict | list):
        return None
    try:
        cleaned = _walk(parsed)
    except RecursionError:
        return None
    if cleaned == parsed:
        return value
    return json.dumps(cleaned, ensure_ascii=False)


def _redact_pairs(value: str) -> str:
    """Redact the values of ``key=value`` and ``key: value`` pairs named like secrets."""
    parts: list[str] = []
    done = 0
    pos = 0
    while (pair := _KEY_SEP.search(value, pos)) is not None:
        pos = pair.end()
        found = _VALUE.match(value, pos)
        if found is None:
            continue
        quote = found["q"]
        if not _hides(pair["key"], found["qval"] if quote else found["val"]):
            # The value may itself be a key ("error: token: ..."): rescan from it.
            continue
        parts.append(value[done:pos])
        parts.append(f"{quote}{REDACTED}{quote}" if quote else REDACTED)
        done = pos = found.end()
    if not parts:
        return value
    parts.append(value[done:])
    return "".join(parts)


def _redact_text(value: str) -> str:
    value = _redact_pairs(value)
    value = _BEARER.sub(lambda m: f"{m[1] or m[2]}{REDACTED}", value)
    for pattern in _TOKEN_PATTERNS:
        value = pattern.sub(REDACTED, value)
    return value


def redact(value: str) -> str:
    """Return ``value`` with every secret it holds replaced by ``[REDACTED]``.

    Pure and never raises for any str. JSON text (an object or array) is
    redacted by key and re-encoded only when something was redacted.
    """
    if not _has_candidate(value):
        return value
    stripped = value.lstrip()
    if stripped[:1] in ("{", "["):
        redacted = _redact_json(value)
        if redacted is not None:
            return redacted
    return _redact_text(value)


def _redact_data(data: Mapping[str, Scalar]) -> Mapping[str, Scalar] | None:
    """Return a redacted copy of ``data``, or ``None`` if nothing changed."""
    # _hides and redact inlined, and no copy unless a value changes: data holds a few
    # counters and labels on every entry, and almost never a secret.
    clean: dict[str, Scalar] | None = None
    for key, value in data.items():
        if value is None or isinstance(value, bool):
            continue
        cls = _key_class(key)
        new: Scalar
        if isinstance(value, str):
            if cls == 2:
                new = value if value.lower() in _NOT_SECRETS else REDACTED
            elif cls == 1 and _looks_secret(value):
                new = REDACTED
            else:
                new = redact(value)
        elif cls == 2:
            new = REDACTED
        else:
            continue
        if new is not value:
            if clean is None:
                clean = dict(data)
            clean[key] = new
    return clean


def _clean(value: str | None) -> str | None:
    if value is None or not _has_candidate(value):
        return value
    return redact(value)


def redact_record(record: Record) -> Record:
    """Return ``record`` with its text fields and ``data`` redacted.

    Returns ``record`` itself when it holds nothing to redact.
    """
    r = record
    arguments, result, error, reason = (
        _clean(r.arguments),
        _clean(r.result),
        _clean(r.error),
        _clean(r.reason),
    )
    data = _redact_data(r.data) if r.data else None
    if (
        data is None
        and arguments == r.arguments
        and result == r.result
        and error == r.error
        and reason == r.reason
    ):
        return record
    return attrs.evolve(
        record,
        arguments=arguments,
        result=result,
        error=error,
        reason=reason,
        data=r.data if data is None else data,
    )
