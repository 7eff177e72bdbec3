"""Typed tool arguments: decoded call arguments or a ``ToolArgumentsError``, nothing else.

The tool's parameters use every supported kind of type (scalars, ``Literal``, an
enum, unions, lists, tuples, ``dict[str, T]``, a TypedDict, a dataclass, nested and
recursive attrs classes). Half the inputs are the bytes as argument text (with lone
surrogates and deep nesting), half are JSON objects built from the bytes with the
real field names. Whatever happens: the error says where (a path or a field) or
that the text is not JSON or past a bound, its text before the path is cut to
``MAX_QUOTED_CHARS``, and decoded arguments re-encode to JSON that decodes to the
same values.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any, Literal, TypedDict

import attrs

from agentcore import ToolArgumentsError, tool
from agentcore._tools._typed import MAX_QUOTED_CHARS, encode_result

from ._bytes import ByteReader
from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (ToolArgumentsError,)


class Mode(enum.Enum):
    fast = "fast"
    slow = "slow"


class Span(TypedDict):
    start: int
    end: int


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


@attrs.define
class Node:
    value: int
    children: list[Node] = attrs.Factory(list)


@attrs.frozen
class Finding:
    path: str
    line: int
    severity: Literal["low", "high"] = "low"
    span: Span | None = None


@tool
def analyse(
    name: str,
    count: int,
    findings: list[Finding],
    mode: Mode = Mode.fast,
    key: int | str | None = None,
    pair: tuple[int, str] = (0, ""),
    weights: dict[str, float] = {},  # noqa: B006
    where: Point | None = None,
    tree: Node | None = None,
    flag: bool = False,
) -> str:
    """Analyse (the fuzz target: its arguments are only decoded)."""
    return ""


FIELDS = ("name", "count", "findings", "mode", "key", "pair", "weights", "where", "tree",
          "flag", "path", "line", "severity", "span", "start", "end", "x", "y", "value",
          "children", "", "other")
_LOCATED = (" - at `$", "field `")
_UNLOCATED = ("invalid JSON arguments: ", "arguments too large", "arguments nested too deeply")


def _value(r: ByteReader, depth: int) -> Any:
    kind = r.below(9 if depth < 6 else 5)
    if kind == 0:
        return r.text()
    if kind == 1:
        return r.number()
    if kind == 2:
        return r.choice((True, False, None))
    if kind == 3:
        return r.choice(("fast", "slow", "low", "high", "mid", "FAST"))
    if kind == 4:
        return r.below(256) - 128
    if kind in (5, 6):
        return {r.choice(FIELDS): _value(r, depth + 1) for _ in range(r.below(5))}
    return [_value(r, depth + 1) for _ in range(r.below(4))]


def _arguments(r: ByteReader) -> str:
    args = {r.choice(FIELDS): _value(r, 1) for _ in range(r.below(8))}
    if r.below(2):  # the required fields, so the rest gets checked
        args.setdefault("name", "n")
        args.setdefault("count", 1)
        args.setdefault("findings", [])
    return json.dumps(args)


def target(data: bytes) -> None:
    r = ByteReader(data)
    if r.below(2):
        # Lone surrogates a quarter of the time, deep nesting around the bound another.
        how = r.below(4)
        text = data[2:].decode("utf-8", "surrogateescape" if how == 0 else "replace")
        if how == 1:
            text = "[" * (60 + r.below(10)) + text
    else:
        text = _arguments(r)
    try:
        args, kwargs = analyse.decode(text)
    except ToolArgumentsError as exc:
        message = str(exc)
        assert message.startswith(_UNLOCATED) or any(s in message for s in _LOCATED), message
        what = message.removeprefix("invalid arguments: ").rpartition(" - at `")[0] or message
        assert len(what) <= MAX_QUOTED_CHARS + len("invalid JSON arguments: ... (cut)"), message
        raise
    assert args == []
    rest, rekwargs = analyse.decode(encode_result("analyse", kwargs))
    assert (rest, rekwargs) == ([], kwargs), (kwargs, rekwargs)


if __name__ == "__main__":
    main(target, ALLOWED)
