"""Tool-call arguments: parsing a model's JSON argument text within fixed bounds.

A model's tool-call arguments are hostile input: the text may be of any size and
nest arrays and objects to any depth. ``json.loads`` needs memory in proportion to
the text and raises ``RecursionError`` on deep nesting, so arguments are checked
against two bounds first, and anything past them is refused with
:class:`ArgumentsError` (the loop turns it into an error tool result; the run goes
on).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .._errors import AgentCoreError

#: The most bytes (UTF-8) of argument JSON text a tool call may carry: 1 MiB.
MAX_ARGUMENT_BYTES = 1 << 20

#: The deepest nesting of arrays and objects in a tool call's arguments (the
#: arguments object itself is level 1).
MAX_ARGUMENT_DEPTH = 64


class ArgumentsError(AgentCoreError, ValueError):
    """Tool-call arguments past a bound: too large or nested too deeply."""


def load_arguments(text: str) -> Any:
    """The value of tool-call argument JSON ``text``, parsed within the bounds. Not a checkpoint.

    Runs in time linear in the text (at most :data:`MAX_ARGUMENT_BYTES`), and never
    recurses deeper than :data:`MAX_ARGUMENT_DEPTH` levels beyond what ``json``
    itself does on accepted input.

    Raises:
      ArgumentsError: the text is longer than :data:`MAX_ARGUMENT_BYTES` bytes, or
        its arrays and objects nest deeper than :data:`MAX_ARGUMENT_DEPTH` levels.
      ValueError: the text is not JSON.
      TypeError: ``text`` is not text.
    """
    if not isinstance(text, str):
        raise TypeError(f"arguments must be JSON text, not {type(text).__name__}")
    if _too_large(text):
        raise ArgumentsError(
            f"arguments too large (more than {MAX_ARGUMENT_BYTES} bytes of JSON text)"
        )
    # Every level opens with "[" or "{": text with few of them cannot nest deeply,
    # and json.loads then needs no guard. Counting is one pass in C.
    shallow = text.count("[") + text.count("{") <= MAX_ARGUMENT_DEPTH
    try:
        value = _loads(text)
    except RecursionError:
        # json's C scanner stops cleanly at the interpreter's recursion limit (far
        # deeper than the bound): refused like any other input past the bound.
        raise _too_deep() from None
    if not shallow and _depth_exceeds(value, MAX_ARGUMENT_DEPTH):
        raise _too_deep()
    return value


# json's scanner (C), as json.loads calls it through two Python frames (the default
# decoder's scan_once: set by JSONDecoder.__init__, not in the type stubs).
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(text: str) -> Any:
    # json.loads(text): the scanner at once when the value spans the whole text (no
    # surrounding whitespace), the usual argument text; else json.loads itself, which
    # decides (its value, or its error for text that is not JSON).
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        end = -1
    if end == len(text):
        return value
    return json.loads(text)


def _too_deep() -> ArgumentsError:
    return ArgumentsError(
        f"arguments nested too deeply (more than {MAX_ARGUMENT_DEPTH} levels of "
        "arrays and objects)"
    )


def _too_large(text: str) -> bool:
    # A character is 1 to 4 bytes of UTF-8: encode only when the length alone
    # does not settle it. Lone surrogates (JSON allows "\ud800" escapes decoded
    # upstream) are counted as the 3 bytes they would take.
    if len(text) > MAX_ARGUMENT_BYTES:
        return True
    if len(text) * 4 <= MAX_ARGUMENT_BYTES:
        return False
    return len(text.encode("utf-8", "surrogatepass")) > MAX_ARGUMENT_BYTES


def _depth_exceeds(value: Any, limit: int) -> bool:
    # Whether arrays and objects nest deeper than ``limit`` levels in a parsed JSON
    # value: a walk level by level (no recursion), each level one comprehension.
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        if not level:
            return False
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
    return bool(level)
