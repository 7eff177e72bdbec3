"""Whether a tool's input schema holds references that loop without end: pure code.

A ``$ref`` whose target leads back to it through ``$ref`` and the in-place keywords
(``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``, ``then``, ``else``), without going
into a property or an item, loops without end: checking any value against it never
finishes (or dies of recursion). Such a schema is refused wherever it is, at the root
or behind a property. A reference through a property or an item (a tree's schema)
ends with the value's depth and is kept.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE = ("not", "if", "then", "else")


def _target(ref: str) -> str | None:
    # The JSON pointer a local "$ref" names, or None for any other kind.
    if ref == "#":
        return ""
    if not ref.startswith("#/"):
        return None
    return urllib.parse.unquote(ref[1:])


def _resolve(root: Any, pointer: str) -> Any:
    node = root
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def ref_loop(schema: Mapping[str, Any]) -> str | None:
    """Where a reference loop of ``schema`` starts (a JSON pointer, ``/`` for the
    root), or None when it has none. Pure; a loop, not a recursion."""
    edges: dict[str, list[str]] = {}
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        pointer, node = stack.pop()
        if isinstance(node, list):
            stack.extend((f"{pointer}/{i}", item) for i, item in enumerate(node))
            continue
        if not isinstance(node, Mapping):
            continue
        out = edges.setdefault(pointer, [])
        ref = node.get("$ref")
        target = _target(ref) if isinstance(ref, str) else None
        if target is not None and isinstance(_resolve(schema, target), Mapping):
            out.append(target.rstrip("/") if target != "/" else target)
        for key in _IN_PLACE_LISTS:
            if isinstance(node.get(key), list):
                out.extend(f"{pointer}/{key}/{i}" for i in range(len(node[key])))
        out.extend(f"{pointer}/{key}" for key in _IN_PLACE if isinstance(node.get(key), Mapping))
        for key, value in node.items():
            escaped = str(key).replace("~", "~0").replace("/", "~1")
            stack.append((f"{pointer}/{escaped}", value))
    # Depth-first, iteratively: a node met again while on the path is a loop.
    state: dict[str, int] = {}  # 1: on the path, 2: done
    for start in edges:
        if state.get(start):
            continue
        path: list[tuple[str, int]] = [(start, 0)]
        state[start] = 1
        while path:
            node, index = path[-1]
            nexts = edges.get(node, [])
            if index == len(nexts):
                state[node] = 2
                path.pop()
                continue
            path[-1] = (node, index + 1)
            after = nexts[index]
            if state.get(after) == 1:
                return after or "/"
            if not state.get(after):
                state[after] = 1
                path.append((after, 0))
    return None
