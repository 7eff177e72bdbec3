"""What a typed tool's function says about itself: its docstring and its parameters.

Pure code, no I/O: :func:`parse_docstring` reads a Google-style docstring (the
description before the first section, and the ``Args:`` entries);
:func:`arguments_type` turns a function's signature into a msgspec Struct type
whose fields are the parameters (a default makes a field optional) and
:func:`parameters_schema` derives the JSON Schema a model is given from it. Every
problem is a :class:`ConfigurationError` raised when the tool is made, never later.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import attrs
import msgspec

from .._errors import ConfigurationError

# Google-style section headers: a line of its own, unindented, ending in a colon.
_SECTIONS = frozenset({
    "args", "arguments", "parameters", "params", "keyword args", "keyword arguments",
    "returns", "return", "yields", "yield", "raises", "exceptions", "example",
    "examples", "note", "notes", "attributes", "see also", "warning", "warnings",
    "todo", "references",
})
_ARGUMENT_SECTIONS = frozenset({
    "args", "arguments", "parameters", "params", "keyword args", "keyword arguments",
})
_HEADER = re.compile(r"([A-Za-z][A-Za-z ]*):\s*")
# "name: text", "name (type): text", "*args: text".
_ENTRY = re.compile(r"\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)")

# The name of the generated Struct (and its module): distinct from any user type,
# so msgspec never has two schema components of one name.
_STRUCT_NAME = "Arguments"
_STRUCT_MODULE = __name__


@attrs.frozen
class Docstring:
    """What a docstring says: the description, and each argument's text by name."""

    description: str
    arguments: Mapping[str, str]


@attrs.frozen
class Parameter:
    """One parameter of a typed tool's function.

    Attributes:
      name: Its name (the JSON field name).
      hint: Its type hint, with its description attached as ``msgspec.Meta``.
      default: Its default, or ``inspect.Parameter.empty`` when it is required.
      positional: Whether it is positional-only (passed by position, not name).
    """

    name: str
    hint: Any
    default: Any
    positional: bool

    @property
    def required(self) -> bool:
        """Whether the model must give it (it has no default)."""
        return self.default is inspect.Parameter.empty


def parse_docstring(doc: str | None) -> Docstring:
    """The description and ``Args:`` entries of a Google-style docstring. Pure.

    The description is the text before the first section header (``Args:``,
    ``Returns:``, ``Raises:``, ``Example:``...). An ``Args:`` entry is
    ``name: text`` or ``name (type): text``; lines indented deeper than the entry
    continue its text.
    """
    if not doc:
        return Docstring("", {})
    description: list[str] = []
    arguments: dict[str, list[str]] = {}
    section: str | None = None
    entry_indent: int | None = None
    current: list[str] | None = None
    for line in inspect.cleandoc(doc).splitlines():
        text = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _HEADER.fullmatch(line)
        if header is not None and header.group(1).lower() in _SECTIONS:
            section, entry_indent, current = header.group(1).lower(), None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in _ARGUMENT_SECTIONS or not text:
            continue
        if entry_indent is None:
            entry_indent = indent
        entry = _ENTRY.fullmatch(text) if indent <= entry_indent else None
        if entry is not None:
            current = arguments.setdefault(entry.group(1), [])
            if entry.group(2):
                current.append(entry.group(2))
        elif current is not None:
            current.append(text)
    return Docstring(
        "\n".join(description).strip(),
        {name: " ".join(parts) for name, parts in arguments.items()},
    )


def signature_parameters(
    fn: Callable[..., Any], tool_name: str, docs: Mapping[str, str]
) -> tuple[Parameter, ...]:
    """The parameters of ``fn``, each hint carrying its description.

    A description given in the hint (``Annotated[T, "text"]`` or
    ``Annotated[T, msgspec.Meta(description="text")]``) wins over the docstring's.

    Raises:
      ConfigurationError: a parameter is ``*args`` or ``**kwargs`` or has no type
        hint, a hint cannot be resolved, or the docstring describes a parameter the
        function does not have.
    """
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ConfigurationError(
            f"tool {tool_name!r}: cannot resolve its type hints ({exc}); "
            "define the types it names at module level"
        ) from None
    signature = inspect.signature(fn)
    unknown = sorted(set(docs) - set(signature.parameters))
    if unknown:
        raise ConfigurationError(
            f"tool {tool_name!r}: its docstring describes {', '.join(map(repr, unknown))}, "
            "which the function does not take"
        )
    params = []
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ConfigurationError(
                f"tool {tool_name!r}: parameter {p.name!r} is *args or **kwargs; "
                "a typed tool takes named parameters only"
            )
        if p.name not in hints:
            raise ConfigurationError(
                f"tool {tool_name!r}: parameter {p.name!r} has no type hint"
            )
        hint = _described(hints[p.name], docs.get(p.name))
        params.append(Parameter(p.name, hint, p.default, p.kind is p.POSITIONAL_ONLY))
    return tuple(params)


def _described(hint: Any, doc: str | None) -> Any:
    # The hint with its description as msgspec.Meta: a plain string in Annotated
    # becomes Meta(description=...), else the docstring's text is added.
    if typing.get_origin(hint) is Annotated:
        base, *extras = typing.get_args(hint)
        texts = [x for x in extras if isinstance(x, str)]
        metas = [x for x in extras if not isinstance(x, str)]
        if texts:
            return _annotated(base, *metas, msgspec.Meta(description=texts[0]))
        if any(isinstance(m, msgspec.Meta) and m.description for m in metas):
            return hint
        if doc:
            return _annotated(base, *metas, msgspec.Meta(description=doc))
        return _annotated(base, *metas) if metas else base
    return _annotated(hint, msgspec.Meta(description=doc)) if doc else hint


def _annotated(base: Any, *metadata: Any) -> Any:
    # Annotated subscripted with a tuple built at run time.
    return typing.cast(Any, Annotated)[(base, *metadata)]


def arguments_type(tool_name: str, params: tuple[Parameter, ...]) -> type[msgspec.Struct]:
    """The msgspec Struct type that decodes and validates the arguments of a call.

    Unknown fields are refused. A parameter with a default is an optional field
    whose default is that same object (as Python's own call would pass it).

    Raises:
      ConfigurationError: msgspec does not support a parameter's type.
    """
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for p in params:
        if p.required:
            fields.append((p.name, p.hint))
        else:
            # A factory, so that msgspec takes any default (it refuses mutable ones).
            fields.append((p.name, p.hint, msgspec.field(default_factory=_constant(p.default))))
    try:
        struct = msgspec.defstruct(
            _STRUCT_NAME, fields, module=_STRUCT_MODULE, forbid_unknown_fields=True
        )
        msgspec.json.Decoder(struct)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"tool {tool_name!r}: unsupported parameter type: {exc}") from None
    return struct


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def parameters_schema(
    tool_name: str, struct: type[msgspec.Struct], params: tuple[Parameter, ...]
) -> dict[str, Any]:
    """The JSON Schema (an object schema) of ``struct``: self-contained, named types
    (dataclasses, attrs classes, TypedDicts, enums) in its ``$defs``.

    Each optional parameter's schema shows its default when it encodes as JSON.

    Raises:
      ConfigurationError: msgspec cannot derive a schema for a parameter's type.
    """
    try:
        (root,), components = msgspec.json.schema_components(
            [struct], ref_template="#/$defs/{name}"
        )
    except TypeError as exc:
        # msgspec's decoder takes any class (it would need a dec_hook); its schema
        # generator says which type it cannot describe on the last line.
        reason = str(exc).strip().splitlines()[-1]
        raise ConfigurationError(
            f"tool {tool_name!r}: unsupported parameter type: {reason}"
        ) from None
    except Exception as exc:  # a KeyError for two types of one qualified name, say
        raise ConfigurationError(
            f"tool {tool_name!r}: cannot derive the JSON schema of its parameters "
            f"({type(exc).__name__}: {exc})"
        ) from None
    key = root["$ref"].rpartition("/")[2]
    schema = {k: v for k, v in components.pop(key).items() if k != "title"}
    properties = schema["properties"]
    for p in params:
        if not p.required:
            properties[p.name].pop("default", None)
            # A default with no JSON form (a sentinel object) is left unsaid.
            with contextlib.suppress(TypeError, ValueError):
                properties[p.name]["default"] = msgspec.to_builtins(p.default)
    if components:
        schema["$defs"] = components
    return schema
