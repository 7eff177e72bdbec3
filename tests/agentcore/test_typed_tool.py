"""``@tool``: the schema derived from each supported parameter type, and a round trip of
valid arguments into the function (exact values and types)."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import attrs
import msgspec
import pytest

from agentcore import (
    Liveness,
    SelfMonitoringTypedTool,
    Tool,
    ToolArgumentsError,
    TypedTool,
    check_liveness,
    tool,
    tool_spec,
)
from agentcore._tools._schema import Docstring, parse_docstring
from tests.agentcore._support import LIST_FACTORY


class Color(enum.Enum):
    red = "red"
    blue = "blue"


class Level(enum.IntEnum):
    low = 1
    high = 2

class Span(TypedDict):
    """A range of lines."""

    start: int
    end: NotRequired[int]


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


@attrs.frozen
class Finding:
    """One finding of a review."""

    path: str
    line: int
    severity: Literal["low", "high"] = "low"
    tags: list[str] = attrs.Factory(list)


@attrs.define
class Node:
    value: int
    children: list[Node] = attrs.Factory(list)


@attrs.frozen
class Report:
    """Findings by file."""

    findings: dict[str, list[Finding]]
    where: Point | None = None
    span: Span | None = None


def schema_of(t: TypedTool[Any, Any]) -> Any:
    # Through JSON, as a model adapter sends it: no Python-only values survive.
    return json.loads(json.dumps(t.parameters))


async def test_scalars_schema_and_round_trip() -> None:
    got: list[tuple[Any, ...]] = []

    @tool
    async def scalars(s: str, i: int, x: float, b: bool, n: None) -> str:
        """Take one of each scalar."""
        got.append((s, i, x, b, n))
        return "ok"

    assert isinstance(scalars, Tool)
    assert scalars.name == "scalars"
    assert scalars.description == "Take one of each scalar."
    assert scalars.read_only is False
    assert scalars.liveness is Liveness.opaque
    assert schema_of(scalars) == {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
            "n": {"type": "null"},
        },
        "required": ["s", "i", "x", "b", "n"],
        "additionalProperties": False,
    }
    assert await scalars.execute('{"s": "é", "i": -3, "x": 2, "b": true, "n": null}') == "ok"
    assert got == [("é", -3, 2.0, True, None)]
    assert type(got[0][2]) is float


async def test_literal_enum_union_optional() -> None:
    got: list[tuple[Any, ...]] = []

    @tool
    def choose(
        mode: Literal["fast", "slow"],
        color: Color,
        level: Level,
        key: int | str,
        limit: Optional[int] = None,  # noqa: UP045  (the spelling under test)
    ) -> str:
        """Choose."""
        got.append((mode, color, level, key, limit))
        return "ok"

    assert schema_of(choose) == {
        "type": "object",
        "properties": {
            "mode": {"enum": ["fast", "slow"]},
            "color": {"$ref": "#/$defs/Color"},
            "level": {"$ref": "#/$defs/Level"},
            "key": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        },
        "required": ["mode", "color", "level", "key"],
        "additionalProperties": False,
        "$defs": {
            "Color": {"title": "Color", "enum": ["blue", "red"]},
            "Level": {"title": "Level", "enum": [1, 2]},
        },
    }
    assert await choose.execute('{"mode": "slow", "color": "blue", "level": 2, "key": "k"}') == "ok"
    assert await choose.execute(
        '{"mode": "fast", "color": "red", "level": 1, "key": 7, "limit": 3}'
    ) == "ok"
    assert got == [
        ("slow", Color.blue, Level.high, "k", None),
        ("fast", Color.red, Level.low, 7, 3),
    ]


async def test_collections() -> None:
    got: list[tuple[Any, ...]] = []

    @tool
    async def gather(
        names: list[str],
        pair: tuple[int, str],
        many: tuple[int, ...],
        weights: dict[str, float],
        nested: list[dict[str, list[int]]],
    ) -> str:
        """Gather."""
        got.append((names, pair, many, weights, nested))
        return "ok"

    assert schema_of(gather)["properties"] == {
        "names": {"type": "array", "items": {"type": "string"}},
        "pair": {
            "type": "array",
            "minItems": 2,
            "maxItems": 2,
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "items": False,
        },
        "many": {"type": "array", "items": {"type": "integer"}},
        "weights": {"type": "object", "additionalProperties": {"type": "number"}},
        "nested": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "integer"}},
            },
        },
    }
    text = (
        '{"names": ["a"], "pair": [1, "b"], "many": [], "weights": {"w": 1.5},'
        ' "nested": [{"k": [1, 2]}]}'
    )
    assert await gather.execute(text) == "ok"
    assert got == [(["a"], (1, "b"), (), {"w": 1.5}, [{"k": [1, 2]}])]


async def test_typeddict_dataclass_attrs_nested() -> None:
    got: list[Report] = []

    @tool
    async def file_report(report: Report) -> str:
        """File a report.

        Args:
          report: The report to file.
        """
        got.append(report)
        return "filed"

    assert schema_of(file_report) == {
        "type": "object",
        "properties": {"report": {"$ref": "#/$defs/Report", "description": "The report to file."}},
        "required": ["report"],
        "additionalProperties": False,
        "$defs": {
            "Report": {
                "title": "Report",
                "description": "Findings by file.",
                "type": "object",
                "properties": {
                    "findings": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "array",
                            "items": {"$ref": "#/$defs/Finding"},
                        },
                    },
                    "where": {
                        "anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}],
                        "default": None,
                    },
                    "span": {
                        "anyOf": [{"$ref": "#/$defs/Span"}, {"type": "null"}],
                        "default": None,
                    },
                },
                "required": ["findings"],
            },
            "Finding": {
                "title": "Finding",
                "description": "One finding of a review.",
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "line": {"type": "integer"},
                    "severity": {"enum": ["high", "low"], "default": "low"},
                    "tags": {"type": "array", "items": {"type": "string"}, **LIST_FACTORY},
                },
                "required": ["path", "line"],
            },
            "Point": {
                "title": "Point",
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0.0}},
                "required": ["x"],
            },
            "Span": {
                "title": "Span",
                "description": "A range of lines.",
                "type": "object",
                "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
                "required": ["start"],
            },
        },
    }
    text = json.dumps({
        "report": {
            "findings": {"a.py": [{"path": "a.py", "line": 3, "severity": "high"}]},
            "where": {"x": 1},
            "span": {"start": 4},
        }
    })
    assert await file_report.execute(text) == "filed"
    assert got == [
        Report(
            findings={"a.py": [Finding("a.py", 3, "high", [])]},
            where=Point(1.0, 0.0),
            span={"start": 4},
        )
    ]


async def test_recursive_attrs_class() -> None:
    got: list[Node] = []

    @tool
    async def walk(tree: Node) -> int:
        """Walk a tree."""
        got.append(tree)
        return len(tree.children)

    assert schema_of(walk)["$defs"] == {
        "Node": {
            "title": "Node",
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {
                    "type": "array", "items": {"$ref": "#/$defs/Node"}, **LIST_FACTORY
                },
            },
            "required": ["value"],
        }
    }
    assert await walk.execute('{"tree": {"value": 1, "children": [{"value": 2}]}}') == "1"
    assert got == [Node(1, [Node(2, [])])]


async def test_descriptions_from_args_annotated_and_meta() -> None:
    @tool
    async def search(
        query: str,
        limit: Annotated[int, "How many hits at most."] = 10,
        offset: Annotated[int, msgspec.Meta(ge=0, description="Hits to skip.")] = 0,
        exact: Annotated[bool, msgspec.Meta(description="Match whole words.")] = False,
        case: Annotated[bool, "From Annotated."] = False,
    ) -> str:
        """Search the index for a query.

        The index is rebuilt nightly.

        Args:
          query (str): What to look for: words, or a quoted
            phrase.
          limit: Overridden by the annotation.
          case: Overridden too.

        Returns:
          The hits, one a line.
        """
        return ""

    assert search.description == "Search the index for a query.\n\nThe index is rebuilt nightly."
    assert schema_of(search)["properties"] == {
        "query": {"description": "What to look for: words, or a quoted phrase.", "type": "string"},
        "limit": {"description": "How many hits at most.", "type": "integer", "default": 10},
        "offset": {"description": "Hits to skip.", "type": "integer", "minimum": 0, "default": 0},
        "exact": {"description": "Match whole words.", "type": "boolean", "default": False},
        "case": {"description": "From Annotated.", "type": "boolean", "default": False},
    }
    assert schema_of(search)["required"] == ["query"]
    with pytest.raises(ToolArgumentsError) as info:
        await search.execute('{"query": "q", "offset": -1}')
    assert str(info.value) == "invalid arguments: Expected `int` >= 0 - at `$.offset`"


async def test_defaults_are_passed_as_python_passes_them() -> None:
    sentinel = object()
    got: list[tuple[Any, ...]] = []
    default_tags = ["x", "y"]

    @tool
    def tagged(tags: list[str] = default_tags, when: Any = sentinel, *, flag: bool = True) -> str:
        """Tag."""
        got.append((tags, when, flag))
        return "ok"

    assert schema_of(tagged)["properties"] == {
        "tags": {"type": "array", "items": {"type": "string"}, "default": ["x", "y"]},
        "when": {},  # a default with no JSON form is not shown
        "flag": {"type": "boolean", "default": True},
    }
    assert schema_of(tagged)["required"] == []
    assert await tagged.execute("{}") == "ok"
    assert got[0][0] is default_tags
    assert got[0][1] is sentinel
    assert got[0][2] is True


async def test_positional_only_and_keyword_only_parameters() -> None:
    @tool
    async def div(a: int, /, b: int, *, round_up: bool = False) -> int:
        """Divide a by b."""
        return -(-a // b) if round_up else a // b

    assert await div.execute('{"a": 7, "b": 2}') == "3"
    assert await div.execute('{"b": 2, "a": 7, "round_up": true}') == "4"
    assert await div(7, 2) == 3  # the decorated object still calls the function


async def test_options_override_name_and_description() -> None:
    @tool(name="lookup", description="Look a key up.", read_only=True)
    def get(key: str) -> str:
        return key.upper()

    assert (get.name, get.description, get.read_only) == ("lookup", "Look a key up.", True)
    assert tool_spec(get).name == "lookup"
    assert await get.execute('{"key": "k"}') == "K"
    assert get("z") == "Z"
    assert repr(get) == (
        "TypedTool(name='lookup', description='Look a key up.', read_only=True, "
        "liveness=<Liveness.opaque: 'opaque'>)"
    )


async def test_self_monitoring_liveness() -> None:
    @tool(liveness=Liveness.self_monitoring)
    async def bounded(n: int) -> int:
        """Bounded by itself."""
        return n

    assert isinstance(bounded, SelfMonitoringTypedTool)
    assert check_liveness(bounded) is Liveness.self_monitoring
    assert await bounded.execute_monitored('{"n": 4}', 1.0) == "4"

    @tool
    async def plain(n: int) -> int:
        """Bounded by the loop."""
        return n

    assert check_liveness(plain) is Liveness.opaque


def test_docstring_sections() -> None:
    doc = parse_docstring(
        """Summary line.

        Second paragraph,
          indented in the middle.

        Arguments:
            path (str, optional): Where
                to look.
            *names: Extra names.
            bare:
                Text on the next line.

        Raises:
            ValueError: not an argument.
        Example::

            call(path="x")
        """
    )
    assert doc == Docstring(
        "Summary line.\n\nSecond paragraph,\n  indented in the middle.",
        {"path": "Where to look.", "names": "Extra names.", "bare": "Text on the next line."},
    )
    assert parse_docstring(None) == Docstring("", {})
    assert parse_docstring("Only a summary.") == Docstring("Only a summary.", {})
