"""Secret shapes: credentials recognised by their form alone (pure, no I/O).

The shapes follow the well-known rules of public secret scanners (gitleaks and
the like); each one is replaced wherever it appears, with or without a label:

==========================  ===================================================
shape                       form
==========================  ===================================================
OpenAI, Anthropic           ``sk-`` + 12 or more of ``[A-Za-z0-9_-]`` (covers
                            ``sk-proj-``, ``sk-svcacct-``, ``sk-ant-api03-``)
Stripe                      ``sk_live_``, ``rk_live_`` (and ``_test_``,
                            ``_prod_``) + 10 or more alphanumerics
GitHub                      ``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_`` + 20
                            or more alphanumerics; ``github_pat_`` + 20 or more
GitLab                      ``glpat-`` + 20 or more of ``[A-Za-z0-9_-]``
Hugging Face                ``hf_`` + 30 or more alphanumerics
Slack                       ``xoxa-``, ``xoxb-``, ``xoxp-``, ``xoxo-``,
                            ``xoxs-``, ``xoxr-`` + 10 or more
Google API key              ``AIza`` + 35 of ``[A-Za-z0-9_-]``
AWS access key id           ``AKIA``, ``ASIA``, ``ABIA``, ``ACCA``, ``A3T?`` +
                            16 of ``[A-Z0-9]``
AWS secret access key       exactly 40 of ``[A-Za-z0-9+/]`` standing alone,
                            with upper and lower case letters and digits, an
                            entropy of 4 bits per character or more and 15 or
                            more changes of character class (hex digests, git
                            hashes, UUIDs and words in camel case have none or
                            few of these)
JSON web token              ``eyJ`` + three dot-separated base64url parts
Bearer token                the token after ``Bearer`` (any token when spelled
                            ``Bearer``; one holding a digit or punctuation in
                            other spellings, so that prose survives)
PEM private key             ``-----BEGIN ... PRIVATE KEY-----`` to its ``END``
                            line (to the end of the text when it has none)
URL userinfo                the password of ``scheme://user:password@host``, or
                            a secret-looking user with no password
MySQL client password       ``-p<secret>`` on a line that runs ``mysql``,
                            ``mysqldump``, ``mysqladmin`` or ``mariadb``
base64 of a secret          a base64 or base64url run of 20 or more characters
                            that decodes to text holding any shape above
==========================  ===================================================

Every pattern is linear: each starts at a literal prefix or at the start of a
run (a look-behind stops it from restarting inside the run it just scanned),
uses possessive or bounded repetition, and never needs more than one attempt
per position; Python loops over matches only. :func:`shape_spans` costs O(n).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import re
from collections import Counter
from typing import Final

Span = tuple[int, int]

# Each pattern starts with its literal prefix (so that the search skips to it) and
# then looks behind the prefix for a boundary. "_" counts as one: a key glued to a
# word by it (``tool_ghp_...``, ``x_sk-proj-...``, as tool names and call ids carry
# them) is found.
_TOKENS: Final = tuple(
    re.compile(pattern)
    for pattern in (
        r"sk-(?<![A-Za-z0-9-]sk-)[A-Za-z0-9_-]{12,}+",
        r"[sr]k_(?:live|test|prod)_(?<![A-Za-z0-9][sr]k_...._)[A-Za-z0-9]{10,}+",
        r"gh[pousr]_(?<![A-Za-z0-9]gh._)[A-Za-z0-9]{20,}+",
        r"github_pat_(?<![A-Za-z0-9]github_pat_)[A-Za-z0-9_]{20,}+",
        r"glpat-(?<![A-Za-z0-9-]glpat-)[A-Za-z0-9_-]{20,}+",
        r"hf_(?<![A-Za-z0-9]hf_)[A-Za-z0-9]{30,}+",
        r"xox[abposr]-(?<![A-Za-z0-9-]xox.-)[A-Za-z0-9-]{10,}+",
        r"AIza(?<![A-Za-z0-9-]AIza)[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])",
        r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])(?<![A-Za-z0-9]A...)[A-Z0-9]{16}(?![A-Za-z0-9])",
        r"eyJ(?<![A-Za-z0-9-]eyJ)[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+",
    )
)
# "Bearer" as HTTP writes it takes any token; other spellings need a token with a
# digit or punctuation (checked in Python), so that "the bearer of bad news" survives.
_BEARER: Final = re.compile(r"(?<![A-Za-z0-9_])(?i:(bearer))[ \t]++([A-Za-z0-9._~+/=-]++)")
_PEM: Final = re.compile(
    r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?s:.*?)(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
_USERINFO: Final = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}+://"
    r"(?:([^\s/?#@:]*+):([^\s/?#]*)|([^\s/?#@:]++))@"
)
_MYSQL: Final = re.compile(
    r"(?<![A-Za-z0-9_-])(?:mysql(?:dump|admin|import|check|show)?|mariadb)\b"
)
_DASH_P: Final = re.compile(r"""(?<!\S)-p('[^'\n]*+'|"[^"\n]*+"|\S++)""")
_BLOB: Final = re.compile(r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_-]{20,}+={0,2}")
_AWS_SECRET: Final = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{40}(?![A-Za-z0-9+/=])")
_URLSAFE: Final = str.maketrans("-_", "+/")

#: How deep base64 inside decoded base64 is followed.
_MAX_B64_DEPTH: Final = 2


def _char_class(c: str) -> int:
    return 0 if "A" <= c <= "Z" else 1 if "a" <= c <= "z" else 2 if "0" <= c <= "9" else 3


def is_aws_secret(run: str) -> bool:
    """Whether a 40-character base64 run has the shape of an AWS secret access key."""
    if len(run) != 40:
        return False
    classes = [_char_class(c) for c in run]
    if not {0, 1, 2} <= set(classes):
        return False
    if sum(a != b for a, b in itertools.pairwise(classes)) < 15:
        return False
    n = len(run)
    entropy = -sum(k / n * math.log2(k / n) for k in Counter(run).values())
    return entropy >= 4.0


def looks_secret(value: str) -> bool:
    """Whether a value stands for a key: 16+ base64 characters with letters and digits."""
    return (
        len(value) >= 16
        and _SECRET_RUN.fullmatch(value) is not None
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


_SECRET_RUN: Final = re.compile(r"[A-Za-z0-9+/=_-]++")


def _decoded(blob: str) -> str | None:
    """The text a base64 run decodes to, or ``None`` if it is not mostly printable text."""
    core = blob.rstrip("=").translate(_URLSAFE)
    core = core[: len(core) - len(core) % 4] if len(core) % 4 == 1 else core
    try:
        raw = base64.b64decode(core + "=" * (-len(core) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    text = raw.decode("latin-1")
    printable = sum(1 for c in text if " " <= c <= "~" or c in "\t\r\n")
    return text if printable * 10 >= len(text) * 9 else None


def shape_spans(text: str, _depth: int = 0) -> list[Span]:
    """Return the ``(start, end)`` spans of every secret shape in ``text``.

    Spans may overlap and come in no particular order. O(n).
    """
    spans: list[Span] = [m.span() for pattern in _TOKENS for m in pattern.finditer(text)]
    for m in _BEARER.finditer(text):
        token = m[2]
        if m[1] == "Bearer" or not token.isalpha():
            spans.append(m.span(2))
    spans.extend(m.span() for m in _PEM.finditer(text))
    for m in _USERINFO.finditer(text):
        if m[2]:
            spans.append(m.span(2))
        elif m[3] is not None and looks_secret(m[3]):
            spans.append(m.span(3))
    pos = 0
    while (tool := _MYSQL.search(text, pos)) is not None:
        eol = text.find("\n", tool.end())
        eol = len(text) if eol < 0 else eol
        spans.extend(p.span(1) for p in _DASH_P.finditer(text, tool.end(), eol))
        pos = eol
    spans.extend(m.span() for m in _AWS_SECRET.finditer(text) if is_aws_secret(m[0]))
    for m in _BLOB.finditer(text):
        blob = m[0]
        if (
            _depth < _MAX_B64_DEPTH
            and (decoded := _decoded(blob)) is not None
            and shape_spans(decoded, _depth + 1)
        ):
            spans.append(m.span())
    return spans
