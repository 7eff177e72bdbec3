"""The forms of a server's secret that masking finds: pure code, no I/O.

A server may echo a credential it was given (its ``env``, its headers) not only as it
is but encoded: each character as a JSON ``\\uXXXX`` escape or a URL ``%XX`` escape
(any mix, hex digits of either case), base64 (standard or URL-safe, at any of the
three byte alignments), or split over two content items (joined by a newline). One
pattern per server finds them all.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Iterable

#: Secrets shorter than this are not masked (replacing them would garble text).
MIN_SECRET = 8


def _char(ch: str) -> str:
    # One character of a secret: itself, its JSON escape, or its URL escape(s).
    forms = [re.escape(ch), "\\\\u" + "".join(_hex(d) for d in f"{ord(ch):04x}")]
    forms.append("".join("%" + _hex(f"{b:02x}"[0]) + _hex(f"{b:02x}"[1])
                         for b in ch.encode("utf-8")))
    return "(?:" + "|".join(forms) + ")"


def _hex(digit: str) -> str:
    return f"[{digit}{digit.upper()}]" if digit.isalpha() else digit


def _base64_cores(secret: str) -> list[str]:
    # The base64 characters that depend on the secret's bytes alone, at each of the
    # three alignments it may start at, standard and URL-safe.
    raw = secret.encode("utf-8")
    cores = []
    for shift in range(3):
        text = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        core = text[-(-8 * shift // 6):(8 * (shift + len(raw))) // 6]
        for form in (core, core.replace("+", "-").replace("/", "_")):
            if len(form) >= MIN_SECRET:
                cores.append(re.escape(form))
    return cores


@functools.lru_cache(maxsize=64)
def secret_pattern(secrets: frozenset[str]) -> re.Pattern[str] | None:
    """A pattern matching every form of each secret of at least :data:`MIN_SECRET`
    characters (longest first), or None when there are none. Pure."""
    kept = sorted((s for s in secrets if len(s) >= MIN_SECRET), key=len, reverse=True)
    if not kept:
        return None
    forms: list[str] = []
    for secret in kept:
        forms.append("\n?".join(_char(ch) for ch in secret))
        forms.extend(_base64_cores(secret))
    return re.compile("|".join(forms))


def mask(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every form of each secret written ``***``. Pure."""
    pattern = secret_pattern(frozenset(secrets))
    return text if pattern is None else pattern.sub("***", text)
