"""Typed output from a JSON Schema: a specs file's ``output_schema`` and the model's
``final_result`` arguments checked against it.

Each input builds a schema from the bytes (real keywords, refused ones, ``$ref``s
local and not, nesting around the depth bound, TOML-only values such as dates and
infinities) and the argument text of a call (JSON built with the schema's field
names, or the raw bytes). Whatever happens: the schema is refused with a
``SpecError`` naming where (or the library missing, or the size), or it is accepted
and then a call decodes or gets a ``ToolArgumentsError`` that names a path or says
the text is not JSON or past a bound, its quoted part cut; a decoded value is valid
JSON that re-encodes.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from agentcore import ToolArgumentsError
from subagent import JsonSchemaOutput, SpecError
from subagent._specs._outputschema import MAX_QUOTED_CHARS

from ._bytes import ByteReader
from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (SpecError, ToolArgumentsError)

KEYWORDS = ("type", "properties", "items", "required", "enum", "const", "minimum",
            "maximum", "minLength", "maxItems", "additionalProperties", "anyOf", "oneOf",
            "allOf", "not", "$defs", "$ref", "pattern", "patternProperties", "uniqueItems",
            "title", "default", "$schema", "prefixItems", "if", "then", "else", "format",
            "contains", "dependentSchemas", "unevaluatedItems", "unevaluatedProperties")
TYPES = ("object", "array", "string", "integer", "number", "boolean", "null", "strin")
NAMES = ("a", "b", "findings", "line", "result", "pattern", "x")
_SPEC_LOCATED = (" - at `$", "needs the jsonschema library", "bytes as JSON; the most is",
                 "must be a table")
_ARG_LOCATED = (" - at `$", "field `")
_ARG_UNLOCATED = ("invalid JSON arguments: ", "arguments too large",
                  "arguments nested too deeply")


def _scalar(r: ByteReader) -> Any:
    kind = r.below(8)
    if kind == 0:
        return r.text()
    if kind == 1:
        return r.number()
    if kind == 2:
        return r.choice((True, False, None))
    if kind == 3:
        return r.choice(TYPES)
    if kind == 4:
        return r.choice(("#", "#/$defs/a", "#/properties/x", "https://example.com/s",
                         "#/nowhere"))
    if kind == 5:
        return r.choice((float("inf"), float("nan"), datetime.date(2024, 1, 1)))
    return r.below(64) - 8


def _schema(r: ByteReader, depth: int) -> Any:
    if depth > 40 or r.below(4) == 0:
        return _scalar(r)
    if r.below(5) == 0:
        return [_schema(r, depth + 1) for _ in range(r.below(4))]
    out: dict[str, Any] = {}
    for _ in range(r.below(5)):
        key = r.choice(KEYWORDS) if r.below(4) else r.choice(NAMES)
        if key == "type":
            out[key] = r.choice(TYPES)
        elif key in ("properties", "$defs", "patternProperties"):
            out[key] = {r.choice(NAMES): _schema(r, depth + 1) for _ in range(r.below(4))}
        elif key == "required":
            out[key] = [r.choice(NAMES) for _ in range(r.below(3))]
        else:
            out[key] = _schema(r, depth + 1)
    if r.below(8) == 0:  # a long chain around the depth bound
        for _ in range(28 + r.below(8)):
            out = {"type": "array", "items": out}
    return out


def _json(r: ByteReader, depth: int) -> Any:
    kind = r.below(7 if depth < 6 else 4)
    if kind == 0:
        return r.text()
    if kind == 1:
        return r.number()
    if kind == 2:
        return r.choice((True, False, None))
    if kind == 3:
        return r.below(256) - 128
    if kind in (4, 5):
        return {r.choice(NAMES): _json(r, depth + 1) for _ in range(r.below(4))}
    return [_json(r, depth + 1) for _ in range(r.below(4))]


def target(data: bytes) -> None:
    r = ByteReader(data)
    schema = _schema(r, 0)
    try:
        output = JsonSchemaOutput(schema)
    except SpecError as exc:
        assert any(s in str(exc) for s in _SPEC_LOCATED), str(exc)
        raise
    assert output.parameters["type"] == "object"
    json.dumps(output.parameters)
    if r.below(3) == 0:
        text = data[r.below(len(data) + 1):].decode("utf-8", "replace")
    else:
        text = json.dumps({r.choice(NAMES): _json(r, 1) for _ in range(r.below(4))})
    try:
        value = output.decode(text)
    except ToolArgumentsError as exc:
        message = str(exc)
        assert message.startswith(_ARG_UNLOCATED) or any(s in message for s in _ARG_LOCATED), (
            message
        )
        what = message.removeprefix("invalid arguments: ").rpartition(" - at `")[0] or message
        assert len(what) <= MAX_QUOTED_CHARS + len("invalid JSON arguments: ... (cut)"), message
        raise
    assert json.loads(output.encode(value)) == value


if __name__ == "__main__":
    main(target, ALLOWED)
