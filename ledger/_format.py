"""Showing entries to people: one readable line per entry."""

from __future__ import annotations

import json
import re

from ._entry import Entry

_UNSAFE = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]|^\s|\s$|^$")


def _value(value: object, width: int | None) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    if isinstance(value, str) and _UNSAFE.search(text):
        return json.dumps(text, ensure_ascii=False)
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
    path = " > ".join(entry.path) or "-"
    head = f"{entry.seq:>6}  {entry.time}  {entry.kind:<16} {path}"
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
