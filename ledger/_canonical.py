"""Checking that stored bytes are the canonical encoding of the entry they decode to.

A JSON parser forgives what the hash does not cover: a member given twice
(the last one wins), members in another order, whitespace, escapes such as
``\\u0041`` for ``A``, ``1.50`` for ``1.5``. A line that decodes to a sound
entry can therefore still show a reader something else (``"result":"forged",
"result":"real"`` displays "forged" in many tools). Verification accepts
only the exact bytes a sink writes. Pure, no I/O.
"""

from __future__ import annotations

import json

from ._encoding import encode_entry
from ._entry import Entry

_DIFFERENT = (
    "its bytes are not the canonical encoding of its content"
    " (member order, whitespace, escapes or number spelling differ)"
)


class _Duplicate(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _Duplicate(name)
            seen.add(name)
    return found


def _duplicate_member(text: str) -> str | None:
    """The first member name that ``text`` (valid JSON) gives twice in one object."""
    try:
        json.loads(text, object_pairs_hook=_pairs)
    except _Duplicate as dup:
        return dup.name
    except (ValueError, RecursionError):
        pass
    return None


def json_flaw(text: str) -> str:
    """Why ``text``, JSON that decodes to what a sink would store, differs from the
    bytes the sink stores."""
    name = _duplicate_member(text)
    if name is None:
        return _DIFFERENT
    shown = repr(name if len(name) <= 40 else name[:40] + "...")
    return f"member {shown} appears twice (a reader may show either value)"


def line_flaw(line: bytes, entry: Entry) -> str | None:
    """Why the ledger line ``line`` (no newline) is not the encoding of ``entry``
    (what it decodes to), or ``None`` if it is."""
    if line == encode_entry(entry).encode("utf-8", "surrogatepass"):
        return None
    return json_flaw(line.decode("utf-8", "surrogatepass"))
