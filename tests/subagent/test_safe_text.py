"""Text from models and tools reaches the terminal with no control character, no
terminal escape and no rich markup that rich would act on."""

from __future__ import annotations

import io
import unicodedata

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from agentcore import Event as CoreEvent
from agentcore import EventKind as K
from agentcore import Message, ModelResponse, ToolCall, Usage
from subagent import Event
from subagent._cli._view import TreeView, render_lines, render_rich
from subagent._safe_text import one_line, safe_text

UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}
HOSTILE = (
    "\x1b]52;c;ZXZpbA==\x07 \x1b[2J\x1b]0;pwned\x07 [red]markup[/red] \u202egnp.exe"
    " back\x08\x08 over\rwrite \x9b31m \u200b\ud800"
)
# Every category, surrogates and the C1 block included, plus the markup characters.
any_text = st.text(
    st.one_of(
        st.characters(codec=None, exclude_categories=()),
        st.sampled_from("[]\\/\x1b\x07\x9b\u202e\u2066\n\r\t"),
    )
)


def unsafe_in(text: str, allowed: str = "") -> list[str]:
    return [ch for ch in text if ch not in allowed and unicodedata.category(ch) in UNSAFE]


@given(any_text)
def test_safe_text_leaves_no_control_or_format_character(text: str) -> None:
    safe = safe_text(text)
    assert unsafe_in(safe) == []
    assert safe_text(safe) == safe  # idempotent
    kept = safe_text(text, keep_newlines=True)
    assert unsafe_in(kept, allowed="\n\t") == []
    assert kept.count("\n") == text.count("\n")
    if not unsafe_in(text):
        assert safe == text  # nothing printable is changed


@given(any_text, st.integers(1, 60))
def test_one_line_is_one_line_and_capped(text: str, limit: int) -> None:
    shown = one_line(text, limit)
    assert unsafe_in(shown) == []
    if len(safe_text(text)) <= limit:
        assert shown == safe_text(text)
    else:
        head, marker = shown.split("… (", 1)
        assert len(head) <= limit
        assert safe_text(text).startswith(head)
        assert marker.endswith(f" of {len(text)} characters shown)")


@given(any_text)
def test_rich_markup_round_trips_as_literal_text(text: str) -> None:
    safe = safe_text(text)
    assert unsafe_in(safe) == []
    # Printed through rich as a Text (as the live tree does), the text is shown as it is.
    console = Console(file=io.StringIO(), width=80, color_system=None, force_terminal=False)
    console.print(Text(safe), end="", soft_wrap=True)
    assert console.file.getvalue() == safe  # type: ignore[attr-defined]
    # (Not asserted: rich.markup.escape round-trips, which it does not for a trailing
    # backslash; the CLI never builds markup from outside text, only Text objects.)


def test_hostile_text_is_shown_escaped() -> None:
    assert safe_text(HOSTILE) == (
        "\\x1b]52;c;ZXZpbA==\\x07 \\x1b[2J\\x1b]0;pwned\\x07 [red]markup[/red] \\u202egnp.exe"
        " back\\x08\\x08 over\\rwrite \\x9b31m \\u200b\\ud800"
    )
    assert safe_text("a\nb\tc\r\n", keep_newlines=True) == "a\nb\tc\\r\n"
    assert one_line("ab\ncd", 4) == "ab\\n… (3 of 5 characters shown)"
    assert one_line("ab\x1bcd", 4) == "ab… (2 of 5 characters shown)"  # never half an escape


def core(kind: K, **kw: object) -> Event:
    return Event(path=("boss/0001",), kind=kind, event=CoreEvent(kind, **kw))  # type: ignore[arg-type]


def test_the_tree_shows_model_text_escaped_and_as_literal_markup() -> None:
    view = TreeView()
    call = ToolCall("c1", "grep\x1b[2J", '{"pattern":\n"\x1b]0;t\x07"}')
    assert view.update(core(K.tool_start, call=call)) == (
        'calls grep\\x1b[2J {"pattern": "\\x1b]0;t\\x07"}'
    )
    reply = ModelResponse(Message("assistant", "[red]alert[/red]\x1b]52;c;ZXZpbA==\x07"))
    line = view.update(core(K.model_response, message=reply.message, usage=Usage(1, 2)))
    assert line == "answered: [red]alert[/red]\\x1b]52;c;ZXZpbA==\\x07"
    for text in render_lines(view):
        assert unsafe_in(text) == []
    console = Console(file=io.StringIO(), width=400, force_terminal=True, color_system="standard")
    console.print(render_rich(view))
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b]" not in shown and "\x1b[2J" not in shown and "\x07" not in shown
    assert "[red]" in shown  # shown literally, not taken as markup
