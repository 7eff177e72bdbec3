"""A key glued to a word by ``_`` (``x_sk-proj-...``, ``tool_ghp_...``: how tool
names and call ids carry them) is redacted like a free-standing one (issue 33 item 6).
Span names and attributes go through the same ``ledger.redact``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import ledger

alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
words = st.text(alnum + "_", min_size=1, max_size=12).filter(lambda w: w[-1] != "_")


@st.composite
def keys(draw: st.DrawFn) -> str:
    prefix = draw(st.sampled_from(["sk-proj-", "sk-", "ghp_", "gho_", "github_pat_",
                                   "glpat-", "hf_", "xoxb-"]))
    size = {"hf_": 30, "sk-": 16, "sk-proj-": 16, "xoxb-": 12}.get(prefix, 22)
    return prefix + draw(st.text(alnum, min_size=size, max_size=size + 8))


@given(words, keys(), st.sampled_from(["", "_call", "-x"]))
def test_a_key_glued_to_a_word_is_redacted(word: str, key: str, tail: str) -> None:
    text = f"{word}_{key}{tail}"
    out = ledger.redact(text)
    assert key not in out
    assert "[REDACTED]" in out
    assert out.startswith(f"{word}_")


def test_examples() -> None:
    assert ledger.redact("x_sk-proj-abcdefghijklmnopqrstuvwx") == "x_[REDACTED]"
    assert ledger.redact("tool_ghp_abcdefghijklmnopqrstuvwxyz12") == "tool_[REDACTED]"
