"""Typed output from a JSON Schema: a specs file's ``output_schema``, checked with the
maintained ``jsonschema`` library (the optional extra ``schema``).

A schema comes from a specs file, so it is untrusted input: it is bounded
(:data:`MAX_SCHEMA_BYTES` of JSON, :data:`MAX_SCHEMA_DEPTH` levels), must be JSON
(TOML dates and non-finite numbers are refused), may refer only within itself
(``$ref`` starting with ``#``: nothing is fetched), and may not use the keywords in
:data:`REFUSED_KEYWORDS`: ``pattern`` and ``patternProperties`` would run a regular
expression from the file on the model's text with Python's ``re`` (backtracking),
and ``uniqueItems`` is quadratic on unhashable items. ``enum`` is checked by hashing:
each ``enum``'s members are put in canonical JSON once per schema, and a value is one
lookup, charged one step per node of the value. ``unevaluatedItems`` and
``unevaluatedProperties`` are this package's linear versions
(:mod:`._unevaluated`; ``jsonschema``'s own are quadratic: 60,000 items took 28 s),
charged to the same bound.
The schema itself is then checked against its metaschema (draft 2020-12 unless
``$schema`` names another).

A call's arguments go through agentcore's bounded parser first
(:func:`agentcore.load_arguments`), then the validator; the first error is the
message, naming the path as typed tools do (``... - at `$.findings[0].line```).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

from agentcore import ArgumentsError, OutputSchema, ToolArgumentsError, load_arguments

from .._errors import SpecError
from ._unevaluated import Unevaluated

#: The largest ``output_schema``, as JSON text (64 KiB).
MAX_SCHEMA_BYTES = 64 * 1024
#: The deepest ``output_schema`` (tables and arrays inside one another).
MAX_SCHEMA_DEPTH = 32
#: Keywords an ``output_schema`` may not use (see the module docstring), with why.
REFUSED_KEYWORDS = {
    "pattern": "a regular expression on model output is refused",
    "patternProperties": "a regular expression on model output is refused",
    "uniqueItems": "a uniqueness check on model output is refused",
    "$id": "references resolve within the schema itself only",
    "id": "references resolve within the schema itself only",  # draft 4's $id
    "$dynamicRef": "references resolve within the schema itself only",
    "$dynamicAnchor": "references resolve within the schema itself only",
    "$recursiveRef": "references resolve within the schema itself only",
    "$recursiveAnchor": "references resolve within the schema itself only",
}
#: The most keyword checks one validation may take (a model's answer, or a trivial
#: sample while loading): ``$ref`` and ``anyOf`` can multiply the work per level.
MAX_CHECK_STEPS = 50_000
_SAMPLES: tuple[Any, ...] = (None, {}, [], 0, "", True)
#: An error's quoted part (it may repeat what the model sent) is cut to this many
#: characters.
MAX_QUOTED_CHARS = 200

# Keywords whose value maps names to schemas (their keys are names, not keywords),
# and keywords whose value is data (not a schema).
_NAME_MAPS = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})
_DATA = frozenset({"enum", "const", "default", "examples"})
_INSTALL = "pip install 'subagent[schema]'"


class JsonSchemaOutput(OutputSchema):
    """The output schema of a JSON Schema (an ``agentcore.OutputSchema``).

    Pass it as ``Spec(output_type=JsonSchemaOutput(schema))``; a specs file's
    ``output_schema`` table becomes one. An object schema with ``properties`` is the
    ``final_result`` tool's parameters itself; any other is wrapped as
    ``{"result": ...}``. The decoded answer is plain JSON data (dicts, lists, ...).

    Raises:
      SpecError: ``jsonschema`` is not installed, or the schema is past a bound,
        not JSON, uses a refused keyword or a non-local ``$ref``, or is not a valid
        JSON Schema. The message says which and where (``$.properties.line``).
    """

    def __init__(self, schema: Mapping[str, Any]) -> None:
        try:
            import jsonschema
            import referencing
        except ImportError:
            raise SpecError(
                f"output_schema needs the jsonschema library: {_INSTALL}"
            ) from None
        refs = check_shape(schema)
        if not isinstance(schema.get("$schema", ""), str):
            raise SpecError("output_schema field '$schema' must be a string - at `$.$schema`")
        self.schema = dict(schema)
        cls = jsonschema.validators.validator_for(
            self.schema, default=jsonschema.Draft202012Validator
        )
        try:
            cls.check_schema(self.schema)
        except jsonschema.SchemaError as exc:
            where = _path(exc.absolute_path)
            raise SpecError(
                f"output_schema is not a valid JSON Schema: {_quoted(exc.message)} - at `{where}`"
            ) from None
        self._steps = _Steps()
        keywords = {k: self._steps.counted(f) for k, f in cls.VALIDATORS.items()}
        if "enum" in keywords:
            keywords["enum"] = self._steps.counted(_HashedEnum(self._steps).check)
        if "unevaluatedItems" in keywords:
            unevaluated = Unevaluated(
                self.schema, self._steps.charge,
                tuple_items="prefixItems" not in cls.VALIDATORS,
            )
            keywords["unevaluatedItems"] = self._steps.counted(unevaluated.items)
            keywords["unevaluatedProperties"] = self._steps.counted(unevaluated.properties)
        counted = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
            cls, keywords
        )
        self._validator = counted(self.schema, registry=referencing.Registry())
        _check_references(self.schema, refs, cls)
        for sample in _SAMPLES:
            self._steps.left = MAX_CHECK_STEPS
            try:
                self._validator.is_valid(sample)
            except _TooMuchWork:
                raise SpecError(
                    f"output_schema takes more than {MAX_CHECK_STEPS} steps to check a "
                    "trivial value (references or combinations that multiply the work)"
                ) from None
            except RecursionError:
                raise SpecError(
                    "output_schema has references that loop without end (a $ref that "
                    "leads back to itself)"
                ) from None
        self.wrapped = not (schema.get("type") == "object" and "properties" in schema)
        title = schema.get("title")
        self.name = title if isinstance(title, str) and title else (
            "JSON object" if not self.wrapped else "JSON value"
        )
        if self.wrapped:
            inner = {k: v for k, v in self.schema.items() if k != "$defs"}
            self.parameters: Mapping[str, Any] = {
                "type": "object",
                "properties": {"result": inner},
                "required": ["result"],
                "additionalProperties": False,
                **({"$defs": self.schema["$defs"]} if "$defs" in self.schema else {}),
            }
        else:
            self.parameters = self.schema

    def __repr__(self) -> str:
        return f"<subagent.JsonSchemaOutput {self.name}>"

    def decode(self, arguments: str) -> Any:
        """The answer in a ``final_result`` call's arguments, valid against the schema.
        Not a checkpoint.

        Raises:
          ToolArgumentsError: the text is past a bound, not JSON, or not valid
            against the schema (the message names the path).
        """
        try:
            value = load_arguments(arguments)
        except ArgumentsError as exc:
            raise ToolArgumentsError(str(exc)) from None
        except (TypeError, ValueError) as exc:
            raise ToolArgumentsError(f"invalid JSON arguments: {_quoted(str(exc))}") from None
        prefix: tuple[str | int, ...] = ()
        if self.wrapped:
            if not isinstance(value, dict):
                raise ToolArgumentsError(
                    f"invalid arguments: Expected `object`, got `{_kind(value)}` - at `$`"
                )
            unknown = sorted(k for k in value if k != "result")
            if unknown:
                raise ToolArgumentsError(
                    f"invalid arguments: Object contains unknown field "
                    f"`{_quoted(unknown[0])}` - at `$`"
                )
            if "result" not in value:
                raise ToolArgumentsError(
                    "invalid arguments: Object missing required field `result`"
                )
            value, prefix = value["result"], ("result",)
        self._steps.left = MAX_CHECK_STEPS
        try:
            error = next(iter(self._validator.iter_errors(value)), None)
        except _TooMuchWork:
            raise ToolArgumentsError(
                "invalid arguments: too much work to check against the output schema "
                f"(more than {MAX_CHECK_STEPS} steps)"
            ) from None
        except RecursionError:
            raise ToolArgumentsError(
                "invalid arguments: too deep to check against the output schema (its "
                "references loop)"
            ) from None
        except (OverflowError, ValueError):
            # jsonschema's float multipleOf on a huge int, Infinity or NaN (the
            # model's reply): its arithmetic fails instead of answering.
            raise ToolArgumentsError(
                "invalid arguments: a number that cannot be checked against the output "
                "schema (too large, or not finite)"
            ) from None
        if error is not None:
            where = _path((*prefix, *error.absolute_path))
            raise ToolArgumentsError(f"invalid arguments: {_quoted(error.message)} - at `{where}`")
        return value


class _TooMuchWork(Exception):
    """A validation ran out of steps (caught inside this module only)."""


class _Steps(threading.local):
    """The keyword checks left to the validation under way, one count per thread
    (runs check answers in worker threads, several at once)."""

    def __init__(self) -> None:
        self.left = MAX_CHECK_STEPS

    def charge(self, count: int) -> None:
        """Take *count* steps; past the bound, raise :class:`_TooMuchWork`."""
        self.left -= count
        if self.left < 0:
            raise _TooMuchWork

    def counted(self, check: Callable[..., Any]) -> Callable[..., Any]:
        def step(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
            self.left -= 1
            if self.left < 0:
                raise _TooMuchWork
            return check(validator, value, instance, schema)
        return step


class _HashedEnum:
    """The ``enum`` keyword as a set lookup: each ``enum`` list's members in canonical
    JSON are hashed once (kept by the list's identity, the list held alive here), and
    a value costs one step per node to put in canonical form (charged to *steps*)."""

    def __init__(self, steps: _Steps) -> None:
        self._steps = steps
        self._sets: dict[int, tuple[Any, frozenset[str]]] = {}

    def check(self, validator: Any, enums: Any, instance: Any, schema: Any) -> Any:
        import jsonschema

        known = self._sets.get(id(enums))
        if known is None or known[0] is not enums:
            known = (enums, frozenset(_canonical(e, None) for e in enums))
            self._sets[id(enums)] = known
        if _canonical(instance, self._steps) not in known[1]:
            message = f"{instance!r} is not one of {enums!r}"
            yield jsonschema.ValidationError(_quoted(message))


def _canonical(value: Any, steps: _Steps | None) -> str:
    # JSON with sorted keys, integral floats as ints (1.0 equals 1 in JSON Schema;
    # true does not), built iteratively; each node costs a step when *steps* is given.
    def plain(node: Any) -> Any:
        if isinstance(node, float) and node.is_integer():
            return int(node)
        return node

    count = 0
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        count += 1
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    if steps is not None:
        steps.charge(count)

    def rebuild(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: rebuild(v) for k, v in node.items()}
        if isinstance(node, list):
            return [rebuild(v) for v in node]
        return plain(node)

    return json.dumps(rebuild(value), sort_keys=True, separators=(",", ":"))


def _check_references(schema: dict[str, Any], refs: list[tuple[str, str]], cls: Any) -> None:
    # Every $ref resolves within the schema (refused keywords keep them relative to
    # its root), so validation never meets one that does not.
    import referencing
    import referencing.jsonschema

    spec = referencing.jsonschema.specification_with(
        schema.get("$schema", ""), default=referencing.jsonschema.DRAFT202012
    )
    resource = spec.create_resource(schema)
    resolver = referencing.Registry().with_resource("", resource).resolver(base_uri="")
    for ref, where in refs:
        try:
            resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            raise SpecError(
                f"output_schema refers to {_quoted(ref, 80)!r}, which it does not hold "
                f"- at `{where}`"
            ) from None


def check_shape(schema: Any) -> list[tuple[str, str]]:
    """Check a schema's size, depth, values, keywords and references (not yet its
    meaning). Pure; iterative (no recursion, whatever the depth). Returns its
    ``$ref`` values, each with where it is.

    Raises:
      SpecError: the first problem, with its path in the schema.
    """
    if not isinstance(schema, Mapping):
        raise SpecError(f"output_schema must be a table, not {type(schema).__name__}")
    refs: list[tuple[str, str]] = []
    stack: list[tuple[Any, tuple[str | int, ...], str]] = [(schema, (), "schema")]
    while stack:
        node, path, role = stack.pop()
        if len(path) > MAX_SCHEMA_DEPTH:
            raise SpecError(
                f"output_schema is nested too deeply (more than {MAX_SCHEMA_DEPTH} levels) "
                f"- at `{_path(path[:MAX_SCHEMA_DEPTH])}`"
            )
        if isinstance(node, Mapping):
            for key, value in node.items():
                if not isinstance(key, str):
                    raise SpecError(f"output_schema keys must be strings - at `{_path(path)}`")
                if role == "schema" and key in REFUSED_KEYWORDS:
                    raise SpecError(
                        f"output_schema may not use {key!r} ({REFUSED_KEYWORDS[key]}) "
                        f"- at `{_path(path)}`"
                    )
                if role == "schema" and key == "$ref":
                    if not (isinstance(value, str) and value.startswith("#")):
                        raise SpecError(
                            "output_schema may only refer within itself ($ref starting "
                            f"with '#') - at `{_path(path)}`"
                        )
                    refs.append((value, _path(path)))
                if role == "names":
                    kind = "schema"
                elif role == "data" or key in _DATA:
                    kind = "data"
                else:
                    kind = "names" if key in _NAME_MAPS else "schema"
                stack.append((value, (*path, key), kind))
        elif isinstance(node, list):
            stack.extend((v, (*path, i), "data" if role == "data" else "schema")
                         for i, v in enumerate(node))
        elif isinstance(node, float) and not math.isfinite(node):
            raise SpecError(f"output_schema holds a non-finite number - at `{_path(path)}`")
        elif not isinstance(node, str | int | float | bool) and node is not None:
            raise SpecError(
                f"output_schema holds a {type(node).__name__}, which JSON has no form for "
                f"- at `{_path(path)}`"
            )
    size = len(json.dumps(schema).encode("utf-8"))
    if size > MAX_SCHEMA_BYTES:
        raise SpecError(
            f"output_schema is {size} bytes as JSON; the most is {MAX_SCHEMA_BYTES}"
        )
    return refs


def read_output_schema(
    where: str, value: Any, error: Callable[[str, str], Exception], kind: Callable[[Any], str]
) -> JsonSchemaOutput:
    """A specs file's ``output_schema`` table as a :class:`JsonSchemaOutput`; a problem
    is ``error(where, text)`` (the reader's SpecFileError naming file, agent and field)."""
    if not isinstance(value, Mapping):
        raise error(where, f"must be a table (a JSON Schema), not {kind(value)}")
    try:
        return JsonSchemaOutput(value)
    except SpecError as exc:
        raise error(where, str(exc).removeprefix("output_schema ")) from None


def read_retries(
    where: str, value: Any, error: Callable[[str, str], Exception], kind: Callable[[Any], str]
) -> int:
    """A specs file's ``output_retries``: an integer of at least 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(where, f"must be an integer, not {kind(value)}")
    if value < 0:
        raise error(where, f"must be at least 0, not {value!r}")
    return value


def _path(parts: Any) -> str:
    text = "$"
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{_quoted(str(part), 40)}"
    return text


def _quoted(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "... (cut)"


def _kind(value: Any) -> str:
    names = {dict: "object", list: "array", str: "str", bool: "bool", int: "int",
             float: "float", type(None): "null"}
    return names.get(type(value), type(value).__name__)
