"""API keys: checked once when an adapter is built, masked in every text a server sends.

A key read from a file or a Kubernetes secret often ends in a newline; httpx then
refuses the header with an error quoting it whole. So surrounding whitespace is
stripped, and a key that still holds a character an HTTP header cannot carry is
refused at construction, naming where the key came from and never any of its
characters. Servers that echo the key back (in an error message, ``repr``-quoted,
``\\xNN``- or ``\\u00NN``-escaped, URL-encoded) have every such form masked by
:func:`redact` before their text is cut or shown.
"""

from __future__ import annotations

import functools
import os
import re

from .._errors import ConfigurationError

#: Shorter "keys" are placeholders (``ollama``, ``x``); replacing them would garble text.
MIN_SECRET_LENGTH = 8

#: What a header value may hold here: visible ASCII. (h11 also admits tabs, spaces and
#: bytes over 0x7F, but no API key has them, and httpx encodes str values as ASCII.)
_HEADER_SAFE = re.compile(r"[\x21-\x7e]*")


def mask(_value: object) -> str:
    """The repr of a secret."""
    return "'***'"


def check_key(value: str, source: str) -> str:
    """``value`` with surrounding whitespace stripped, checked to be sendable as a header.

    Args:
      value: The key as given.
      source: Where it came from, for the error: ``"the OPENAI_API_KEY variable"``,
        ``"the api_key argument"``.

    Raises:
      ConfigurationError: the key holds a control character, an inner space or a
        non-ASCII character. The message names ``source`` and none of the key.
    """
    if not isinstance(value, str):
        kind = type(value).__name__
        raise ConfigurationError(f"The key from {source} must be a string, not {kind}")
    key = value.strip()
    if _HEADER_SAFE.fullmatch(key) is None:
        raise ConfigurationError(
            f"The key from {source} holds a control character, a space or a non-ASCII "
            "character, which an HTTP header cannot carry: check how the key was stored "
            "(surrounding whitespace is already stripped)"
        )
    return key


def redact(text: str, secret: str) -> str:
    """``text`` with every form of ``secret`` replaced by ``***``.

    The forms are the key itself and the key with any of its characters written as
    ``\\xNN``, ``\\u00NN`` or ``%NN`` (hex digits in either case), or backslash-escaped
    as ``repr`` and JSON write quotes, backslashes and slashes; any mix of them is
    matched. Secrets shorter than :data:`MIN_SECRET_LENGTH` are placeholders and left
    alone. Costs time linear in ``len(text)`` (times the key's length at worst).
    """
    if len(secret) < MIN_SECRET_LENGTH or not text:
        return text
    return _pattern(secret).sub("***", text)


@functools.lru_cache(maxsize=16)
def _pattern(secret: str) -> re.Pattern[str]:
    return re.compile("".join(_forms(char) for char in secret))


def _forms(char: str) -> str:
    code = ord(char)
    forms = [re.escape(char)]
    if code < 0x100:
        hex_digits = "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{code:02x}")
        forms += [rf"\\x{hex_digits}", rf"\\u00{hex_digits}", f"%{hex_digits}"]
    if char in "\\'\"/":
        forms.append(re.escape("\\" + char))
    return "(?:" + "|".join(forms) + ")"


def env_key(variable: str) -> str:
    """The key in environment variable ``variable`` ("" when unset), checked.

    Raises:
      ConfigurationError: as :func:`check_key`, naming the variable.
    """
    return check_key(os.environ.get(variable, ""), f"the {variable} variable")


def argument_key(value: str) -> str:
    """An ``api_key=`` argument, checked (an attrs converter).

    Raises:
      ConfigurationError: as :func:`check_key`, naming the argument.
    """
    return check_key(value, "the api_key argument")
