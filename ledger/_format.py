"""Showing entries to people: one readable line per entry."""

from __future__ import annotations

import json
import re

from ._entry import Entry

_UNSAFE = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]|^\s|\s$|^$")


def as_json(value: object) -> str:
    """``value`` as JSON text safe to print: non-ASCII characters kept unless one of
    them is not printable (a C1 control, a bidi override or other format
    character, a separator, a lone surrogate): then every one is escaped."""
    text = json.dumps(value, ensure_ascii=False)
    return text if text.isprintable() else json.dumps(value)


def _plain(text: str) -> str:
    # A head field (time, kind, a path segment): as it is, or quoted if unprintable.
    return text if text.isprintable() else as_json(text)


def _value(value: object, width: int | None) -> str:
    text = value if isinstance(value, str) else as_json(value)
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    if isinstance(value, str) and (_UNSAFE.search(text) or not text.isprintable()):
        return as_json(text)
    return text


def _seconds(value: float) -> str:
    try:
        return f"{float(value):.3f}s"
    except OverflowError:  # an int too large for a float: a tampered file, shown as it is
        return f"{value}s"


def format_entry(entry: Entry, *, width: int | None = 200) -> str:
    """Return ``entry`` as one line: seq, time, kind, path, then the set fields.

    Args:
      entry: The entry to show.
      width: Cut each field value longer than this (``None``: never).
    """
    path = " > ".join(_plain(segment) for segment in entry.path) or "-"
    head = f"{entry.seq:>6}  {_plain(entry.time)}  {_plain(entry.kind):<16} {path}"
    fields: list[str] = []
    if entry.run_id:
        fields.append(f"run={_value(entry.run_id, width)}")
    if entry.agent_id:
        fields.append(f"agent={_value(entry.agent_id, width)}")
    for name in ("tool", "call_id", "verdict", "reason", "arguments", "result", "error"):
        value = getattr(entry, name)
        if value is not None:
            fields.append(f"{name}={_value(value, width)}")
    if entry.duration is not None:
        fields.append(f"duration={_seconds(entry.duration)}")
    for key, value in entry.data.items():
        fields.append(f"{key}={_value(value, width)}")
    return "  ".join([head, " ".join(fields)]) if fields else head
