"""Text from outside, made safe to print on a terminal.

Whatever a model or a tool wrote reaches the terminal only through :func:`safe_text`
or :func:`one_line`: every character that a terminal acts on instead of showing
(C0 and C1 controls, so ESC and every CSI/OSC sequence it starts, BEL, backspace,
CR; DEL) and every character that can hide or reorder text (Unicode format
characters such as bidi overrides and zero-width joiners, line and paragraph
separators, lone surrogates) is shown escaped, Python style (``\\x1b``,
``\\u202e``). Backslashes are left as they are: an escape that the text itself
spelled is harmless, it is only shown.

Rich markup is never built from such text: the live tree uses ``rich.text.Text``
objects, which rich does not parse for markup.
"""

from __future__ import annotations

import unicodedata

#: Categories shown escaped: controls, format characters (bidi overrides, zero-width
#: characters, tags), line and paragraph separators, surrogates.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _unsafe(ch: str) -> bool:
    # Printable ASCII is by far the common case; skip the table lookup for it.
    return not (" " <= ch <= "~") and unicodedata.category(ch) in _UNSAFE_CATEGORIES


def safe_text(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every unsafe character escaped (see the module docstring).

    With ``keep_newlines``, ``\\n`` and ``\\t`` stay as they are (multi-line output such
    as a final answer); ``\\r`` is escaped all the same, so no line can overwrite
    another. The result never contains ESC, another control character other than
    those two, or a format character; applying it twice changes nothing.
    """
    # str.isprintable (C speed) is False for every unsafe category, so most text is
    # checked without a per-character loop.
    if (text.replace("\n", "").replace("\t", "") if keep_newlines else text).isprintable():
        return text
    kept = "\n\t" if keep_newlines else ""
    return "".join(_escape(ch) if ch not in kept and _unsafe(ch) else ch for ch in text)


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` escaped onto one line (newlines and tabs escaped too), at most ``limit``
    characters of it shown.

    A longer text is cut at a character boundary of the escaped form (never inside an
    escape) and ends with ``… (N of M characters shown)``, M counting the characters
    of ``text`` itself.
    """
    safe = safe_text(text)
    if limit is None or len(safe) <= limit:
        return safe
    shown_chars = 0
    width = 0
    for ch in text:
        piece = _escape(ch) if _unsafe(ch) else ch
        if width + len(piece) > limit:
            break
        width += len(piece)
        shown_chars += 1
    return f"{safe_text(text[:shown_chars])}… ({shown_chars} of {len(text)} characters shown)"
