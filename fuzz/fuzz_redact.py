"""``ledger.redact`` on arbitrary text: never raises, bounded growth, idempotent.

Half the inputs are decoded as UTF-8 text as they are; the other half pick, byte
by byte, pieces of the syntax the redactor reacts to (credential words,
separators, quotes, escapes, key prefixes, JSON brackets, PEM lines, base64),
so that they reach the rules behind the prefilter. The output is at most
``10 * len(text) + 10`` characters (see ``ledger._redact``); redacting it again
changes nothing; ``redact_record`` accepts the text in every field.
"""

from __future__ import annotations

import base64

import ledger

from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = ()

PIECES = (
    "token", "key", "api_key", "password", "Authorization", "Proxy-Authorization", "Bearer ",
    "Basic ", "DATABASE_URL", "=", ": ", ":", '"', "'", "\\", '\\"', "\\u006b", "\\u0022",
    "\\x41", "{", "}", "[", "]", ",", " ", "\n", "\r\n", "\t", ".", "-", "_", "/", "+", "@",
    "://", "https://", "a", "Z", "0", "9", "sk-", "sk-proj-", "sk_live_", "ghp_", "glpat-",
    "hf_", "xoxb-", "AIza", "AKIA", "eyJ", "mysql", " -p", "-----BEGIN PRIVATE KEY-----",
    "-----END PRIVATE KEY-----", "null", "[REDACTED]", "abcdefghijklmnop0123",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    base64.b64encode(b"key sk-proj-abcdefghijklmnop12").decode(),
    "\u00e9", "\ud800", "\x00",
)  # fmt: skip


def text_of(data: bytes) -> str:
    if data[:1] and data[0] & 1:
        return "".join(PIECES[b % len(PIECES)] for b in data[1:])
    return data[1:].decode("utf-8", "replace")


def target(data: bytes) -> None:
    text = text_of(data)
    once = ledger.redact(text)
    assert len(once) <= 10 * len(text) + 10, (text, once)
    assert ledger.redact(once) == once, (text, once)
    assert once is text or once != text
    record = ledger.Record(
        "tool_result", tool=text, call_id=text, arguments=text, result=text, error=text,
        reason=text, data={"note": text, "token": text},
    )  # fmt: skip
    clean = ledger.redact_record(record)
    assert clean.result == once, (text, clean.result, once)
    assert ledger.redact_record(clean) == clean


if __name__ == "__main__":
    main(target, ALLOWED)
