"""Reading the JSON of replies: typed field access, depth-safe parsing and re-encoding.

Sans-IO. Parsing a reply nested deeper than the interpreter's recursion allows is
:class:`Malformed` ("nested too deeply"), never a ``RecursionError``; a provider's
tool input (an object) is re-encoded to argument text with :func:`encode_input`,
which never recurses past its first try, so any input that parsed comes out as text
(and a too-deep one is then refused by the agent loop as arguments nested too deeply).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from ._limits import cut
from ._sse import ServerSentEvent

T = TypeVar("T")

#: How much of a server-chosen name (an event type) an error message quotes.
_NAME_CHARS = 40


class Malformed(Exception):
    """A response field is missing or of the wrong type (internal; adapters turn it into
    a ModelError naming the API)."""


def try_loads(text: str | bytes) -> tuple[Any, str | None]:
    """``(value, None)`` for ``text`` parsed as JSON, else ``(None, problem)``: what is
    wrong, "nested too deeply" included. Returns instead of raising so that no decode
    error (whose ``doc`` is the whole reply, perhaps with an echoed key) is chained to
    the error a caller raises."""
    try:
        return json.loads(text), None
    except RecursionError:
        return None, "nested too deeply"
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many int digits
        return None, cut(str(exc), 200)


def loads(text: str | bytes, where: str) -> Any:
    """``text`` parsed as JSON, or :class:`Malformed` naming ``where`` and the problem."""
    value, problem = try_loads(text)
    if problem is not None:
        raise Malformed(f"{where} is not valid JSON ({problem})")
    return value


def encode_input(value: object) -> str:
    """A parsed tool input (any JSON value) as JSON text, exactly as ``json.dumps``
    writes it, at any depth (never a ``RecursionError``)."""
    try:
        return json.dumps(value)
    except RecursionError:
        pass
    return _encode_without_recursion(value)


class _Punct(str):
    """Text to copy as it is while encoding (brackets, separators, encoded keys)."""


def _encode_without_recursion(value: object) -> str:
    parts: list[str] = []
    todo: list[object] = [value]  # what is left to write, last item first
    while todo:
        item = todo.pop()
        if isinstance(item, _Punct):
            parts.append(item)
        elif isinstance(item, Mapping):
            todo.append(_Punct("}"))
            members: list[object] = []
            for key, member in item.items():
                name = key if isinstance(key, str) else json.dumps(key)
                members += [_Punct(", "), _Punct(json.dumps(name) + ": "), member]
            todo += reversed(members[1:])
            todo.append(_Punct("{"))
        elif isinstance(item, list | tuple):
            todo.append(_Punct("]"))
            elements: list[object] = []
            for element in item:
                elements += [_Punct(", "), element]
            todo += reversed(elements[1:])
            todo.append(_Punct("["))
        else:
            parts.append(json.dumps(item))
    return "".join(parts)


_MISSING: Any = object()


def as_object(value: object, where: str) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else :class:`Malformed` naming ``where``."""
    if not isinstance(value, Mapping):
        raise Malformed(f"{where} is {_json_type(value)}, not an object")
    return value


def field(obj: Mapping[str, Any], key: str, kind: type[T], where: str, default: T = _MISSING) -> T:
    """``obj[key]`` checked to be a ``kind``; a missing or null field is ``default``
    when one is given, else :class:`Malformed` naming ``where.key``."""
    value = obj.get(key)
    if value is None:
        if default is _MISSING:
            raise Malformed(f"{where}.{key} is missing")
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise Malformed(f"{where}.{key} is {_json_type(value)}, not {_json_type_name(kind)}")
    return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return _json_type_name(type(value))


def _json_type_name(kind: type) -> str:
    names: dict[type, str] = {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }
    for base, name in names.items():
        if issubclass(kind, base):
            return name
    if issubclass(kind, Mapping):
        return "an object"
    return kind.__name__


def event_name(event: ServerSentEvent) -> str:
    """The event's type, quoted for an error message; a long one is only measured.

    Never cut: the key is masked in the whole message later, and a name cut here
    could end inside an echoed key, whose first characters would then survive."""
    if len(event.event) > _NAME_CHARS:
        return f"<{len(event.event)}-character name>"
    return repr(event.event)


def event_json(event: ServerSentEvent) -> Mapping[str, Any]:
    """The JSON object an event's data holds, or :class:`Malformed`."""
    where = f"a {event_name(event)} event's data"
    return as_object(loads(event.data, where), where)
