"""Credentials by name: which keys hold a secret, and their values in text (pure).

A key (a JSON member name, or the ``key`` of ``key=value`` / ``key: value`` in
text) is split into words (``x-api-key``, ``apiKey`` and ``API_KEY`` are all
``api key``) and classified:

* a *line* key (``authorization``, ``proxy-authorization``, ``password``,
  ``passwd``, ``pwd``, ``passphrase``, ``cookie``) hides its value to the end of
  the line: every scheme of an ``Authorization`` header (``Bearer``, ``Token``,
  ``Basic``, ...) and multi-word passwords;
* a *secret* key (``token``, ``secret``, ``api_key``, ``access_key``,
  ``private_key``, ``client_secret``, ``credentials``, ... and connection
  strings: ``DATABASE_URL``, ``REDIS_URL``, ``MONGO_URI``, ``SENTRY_DSN``, ...)
  hides one value (a quoted string, a URL up to a space or quote, or a run up
  to a space, quote, ``,``, ``;``, ``&``, ``}`` or ``]``);
* a key named ``...key`` hides a value that looks like a key (16 or more base64
  characters with letters and digits);
* a key naming a property of a credential (``max_tokens``, ``token_count``,
  ``password_length``, ``auth_url``) hides nothing.

Values ``null``, ``true``, ``false``, ``none`` and empty ones are kept.
:func:`pair_spans` is O(n): one linear search for ``key`` + separator, and
each value is scanned once (a value that is kept is short or is a run whose
end is remembered).
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import Final

from ._shapes import Span

NONE: Final = 0
"""The key names no credential."""
KEYISH: Final = 1
"""The key is named ``...key``: its value is hidden if it looks like a key."""
SECRET: Final = 2
"""The key names a credential: its value is hidden."""
LINE: Final = 3
"""The key names a credential written to the end of its line."""

_LINE_WORDS: Final = frozenset(
    {"authorization", "password", "passwd", "pwd", "passphrase", "cookie"}
)
_SECRET_WORDS: Final = frozenset(
    {
        "token",
        "secret",
        "auth",
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
        "dsn",
        "connectionstring",
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
_SECRET_PAIRS: Final = frozenset(
    {("api", "key"), ("access", "key"), ("private", "key"), ("connection", "string")}
)
# A URL named for a data store carries its credentials: DATABASE_URL, REDIS_URL.
_STORE_WORDS: Final = frozenset(
    {
        "database",
        "db",
        "redis",
        "mongo",
        "mongodb",
        "postgres",
        "postgresql",
        "pg",
        "mysql",
        "mariadb",
        "amqp",
        "rabbitmq",
        "broker",
        "celery",
        "sqlalchemy",
        "memcached",
        "elasticsearch",
        "kafka",
        "nats",
    }
)
NOT_SECRETS: Final = frozenset({"", "null", "true", "false", "none", "[redacted]"})
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_NON_WORD = re.compile(r"[^a-z0-9]+")

_PAIR: Final = re.compile(
    r"""(?<![A-Za-z0-9_.\-])([A-Za-z0-9_.\-]++)(?:\\?["'])?[ \t]*+([:=])(?!//)[ \t]*+"""
)
# A value is one run; a URL (a connection string) runs to the next space or quote.
_PLAIN_VALUE: Final = re.compile(
    r"""(?:[Bb]earer[ \t]++)?(?:[A-Za-z][A-Za-z0-9+.-]{0,30}+://[^\s"'<>]*+|[^\s"',;&}\]]*+)"""
)
_QUOTED: Final = {
    '"': re.compile(r'(?:[^"\\\n]|\\.)*+"'),
    "'": re.compile(r"(?:[^'\\\n]|\\.)*+'"),
}
# In double-encoded text (``{\"password\": \"pw\"}``) a value ends at an escaped quote.
_ESCAPED_QUOTED: Final = {
    '"': re.compile(r'(?:[^\\\n]|\\[^"])*+\\"'),
    "'": re.compile(r"(?:[^\\\n]|\\[^'])*+\\'"),
}
_KEY_RUN: Final = re.compile(r"[A-Za-z0-9+/=_-]*+")
_LAST_DIGIT: Final = re.compile(r"[A-Za-z0-9+/=_-]*[0-9]")
_LAST_ALPHA: Final = re.compile(r"[A-Za-z0-9+/=_-]*[A-Za-z]")
_NOT_SECRET_MAX: Final = max(map(len, NOT_SECRETS))
_MAX_KEY: Final = 256


@functools.lru_cache(maxsize=2048)
def key_class(key: str) -> int:
    """Classify a key name: :data:`NONE`, :data:`KEYISH`, :data:`SECRET` or :data:`LINE`."""
    if len(key) > _MAX_KEY:
        return NONE
    words = [w for w in _NON_WORD.split(_CAMEL.sub(r"\1_\2", key).lower()) if w]
    if not words:
        return NONE
    if words[-1] in ("url", "uri", "dsn") and any(w in _STORE_WORDS for w in words):
        return SECRET
    if any(w in _ABOUT_WORDS for w in words):
        return NONE
    if any(w in _LINE_WORDS for w in words):
        return LINE
    if any(w in _SECRET_WORDS for w in words) or "".join(words) in _SECRET_WORDS:
        return SECRET
    if any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words)):
        return SECRET
    return KEYISH if words[-1] == "key" else NONE


def is_kept(value: str) -> bool:
    """Whether a credential's value is a placeholder, not a secret (``null``, ...)."""
    return len(value) <= _NOT_SECRET_MAX and value.strip().lower() in NOT_SECRETS


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    end = len(text) if end < 0 else end
    while end > pos and text[end - 1] in " \t\r":
        end -= 1
    return end


class _Run:
    """The run of base64 characters a ``...key`` value was last found in.

    Remembered so that ``key=key=key=...`` scans the run once, not once per key:
    a value starting inside the run ends where the run ends, and holds a digit
    (a letter) if the run's last digit (letter) is at or after its start.
    """

    __slots__ = ("end", "last_alpha", "last_digit", "start")

    def __init__(self) -> None:
        self.start = self.end = self.last_digit = self.last_alpha = -1

    def scan(self, text: str, start: int) -> None:
        self.start = start
        self.end = _KEY_RUN.match(text, start).end()  # type: ignore[union-attr]
        digit = _LAST_DIGIT.match(text, start, self.end)
        alpha = _LAST_ALPHA.match(text, start, self.end)
        self.last_digit = -1 if digit is None else digit.end() - 1
        self.last_alpha = -1 if alpha is None else alpha.end() - 1

    def looks_secret(self, start: int) -> bool:
        """Whether the run's part from ``start`` looks like a key (see ``looks_secret``)."""
        return self.end - start >= 16 and min(self.last_digit, self.last_alpha) >= start


def pair_spans(text: str) -> list[Span]:
    """Return the spans of the values of ``key=value`` / ``key: value`` pairs to hide.

    Spans are ordered and do not overlap. O(n).
    """
    spans: list[Span] = []
    done = 0
    run = _Run()
    size = len(text)
    for pair in _PAIR.finditer(text):
        if pair.start() < done:
            continue
        cls = key_class(pair[1].lstrip("-."))
        if cls == NONE:
            continue
        pos = pair.end()
        if pos >= size or text.startswith("[REDACTED]", pos):
            continue
        quote, escaped = text[pos], False
        if quote == "\\" and text[pos + 1 : pos + 2] in ('"', "'"):
            quote, escaped = text[pos + 1], True
        if cls == KEYISH:
            start = pos + 2 if escaped else pos + 1 if quote in "\"'" else pos
            if not run.start <= start < run.end:
                run.scan(text, start)
            end = run.end
            if quote in "\"'":
                if not text.startswith("\\" + quote if escaped else quote, end):
                    continue
            elif end < size and text[end] not in " \t\r\n\"',;&}]":
                continue
            if run.looks_secret(start):
                spans.append((start, end))
                done = end
            continue
        if quote in "\"'":
            start = pos + 2 if escaped else pos + 1
            table = _ESCAPED_QUOTED if escaped else _QUOTED
            found = table[quote].match(text, start)
            if found is not None:
                end = found.end() - (2 if escaped else 1)
            else:
                end = _line_end(text, start)  # unterminated: the rest of the line
        elif cls == LINE and (pair[2] == ":" or "authoriz" in pair[1].lower()):
            start, end = pos, _line_end(text, pos)
        else:
            start, end = pos, _PLAIN_VALUE.match(text, pos).end()  # type: ignore[union-attr]
        if end > start and (end - start > _NOT_SECRET_MAX or not is_kept(text[start:end])):
            spans.append((start, end))
            done = end
    return spans
