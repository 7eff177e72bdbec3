"""``@tool`` errors: argument text that does not fit (an exact message naming the field),
results with no JSON form, and functions refused at decoration."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

import pytest

from agentcore import ConfigurationError, ToolArgumentsError, tool
from tests.agentcore.test_typed_tool import Color, Finding, Level, Point


async def test_results_encode_as_json() -> None:
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)

    @tool
    def result(kind: str) -> Any:
        """Return something of a kind."""
        return {
            "str": "plain text, not JSON",
            "attrs": Finding("a.py", 1),
            "dataclass": Point(1.5),
            "enum": [Color.red, Level.high],
            "datetime": when,
            "none": None,
            "tuple": (1, "a"),
            "object": object(),
        }[kind]

    expected = {
        "str": "plain text, not JSON",
        "attrs": '{"line":1,"path":"a.py","severity":"low","tags":[]}',  # msgspec's order
        "dataclass": '{"x":1.5,"y":0.0}',
        "enum": '["red",2]',
        "datetime": '"2026-01-02T03:04:05Z"',
        "none": "null",
        "tuple": '[1,"a"]',
    }
    for kind, text in expected.items():
        assert await result.execute(json.dumps({"kind": kind})) == text
    with pytest.raises(TypeError) as info:
        await result.execute('{"kind": "object"}')
    assert str(info.value) == (
        "tool 'result' returned object, which has no JSON form "
        "(Encoding objects of type object is unsupported)"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"count": "3"}', "invalid arguments: Expected `int`, got `str` - at `$.count`"),
        ("{}", "invalid arguments: Object missing required field `count`"),
        ('{"count": 1, "extra": 2}', "invalid arguments: Object contains unknown field `extra`"),
        ("[1]", "invalid arguments: Expected `object`, got `array` - at `$`"),
        (
            '{"count": 1, "items": [{"path": "a", "line": "x"}]}',
            "invalid arguments: Expected `int`, got `str` - at `$.items[0].line`",
        ),
        (
            '{"count": 1, "items": [{"path": "a", "line": 1, "severity": "mid"}]}',
            "invalid arguments: Invalid enum value 'mid' - at `$.items[0].severity`",
        ),
        ('{"count": 1', "invalid JSON arguments: Input data was truncated"),
        (
            '{"count": 1} x',
            "invalid JSON arguments: JSON is malformed: trailing characters (byte 14)",
        ),
        ("", "invalid JSON arguments: Input data was truncated"),
        (
            '{"count": "\ud800"}',
            "invalid JSON arguments: the text holds a lone surrogate (not valid Unicode)",
        ),
        (
            "[" * 65 + "]" * 65,
            "arguments nested too deeply (more than 64 levels of arrays and objects)",
        ),
        (
            "[" * 200_000,
            "arguments nested too deeply (more than 64 levels of arrays and objects)",
        ),
        (
            '{"count": "' + "x" * (1 << 20) + '"}',
            "arguments too large (more than 1048576 bytes of JSON text)",
        ),
    ],
)
async def test_invalid_arguments_name_the_field(text: str, message: str) -> None:
    @tool
    async def review(count: int, items: list[Finding] = []) -> str:  # noqa: B006
        """Review."""
        raise AssertionError("never called")

    with pytest.raises(ToolArgumentsError) as info:
        await review.execute(text)
    assert str(info.value) == message


async def test_error_text_is_cut_at_200_characters_before_the_path() -> None:
    @tool
    async def paint(color: Color) -> str:
        """Paint."""
        return "ok"

    with pytest.raises(ToolArgumentsError) as info:
        await paint.execute(json.dumps({"color": "z" * 5000}))
    assert str(info.value) == (
        f"invalid arguments: Invalid enum value '{'z' * 180}... (cut) - at `$.color`"
    )
    with pytest.raises(ToolArgumentsError) as info:
        await paint.execute(json.dumps({"color": "red", "q" * 5000: 1}))
    assert str(info.value) == (
        f"invalid arguments: Object contains unknown field `{'q' * 169}... (cut)"
    )


def test_misconfigured_functions_are_refused_at_decoration() -> None:
    def no_doc(a: int) -> str:
        return ""

    def no_hint(a) -> str:  # type: ignore[no-untyped-def]
        """Doc."""
        return ""

    def star(*a: int) -> str:
        """Doc."""
        return ""

    def unsupported(a: complex) -> str:
        """Doc."""
        return ""

    def stray(a: int) -> str:
        """Doc.

        Args:
          b: Not a parameter.
        """
        return ""

    def gen(a: int) -> Any:
        """Doc."""
        yield a

    def unresolved(a: Missing) -> str:  # type: ignore[name-defined]  # noqa: F821
        """Doc."""
        return ""

    cases: list[tuple[Callable[..., Any], str]] = [
        (no_doc, "tool 'no_doc' has no description: give the function a docstring or pass "
         "description="),
        (no_hint, "tool 'no_hint': parameter 'a' has no type hint"),
        (star, "tool 'star': parameter 'a' is *args or **kwargs; a typed tool takes named "
         "parameters only"),
        (unsupported, "tool 'unsupported': unsupported parameter type: type <class 'complex'> "
         "is not supported"),
        (stray, "tool 'stray': its docstring describes 'b', which the function does not take"),
        (gen, "tool 'gen': a generator function cannot be a tool; return the result"),
        (unresolved, "tool 'unresolved': cannot resolve its type hints (name 'Missing' is not "
         "defined); define the types it names at module level"),
    ]
    for fn, message in cases:
        with pytest.raises(ConfigurationError) as info:
            tool(fn)
        assert str(info.value) == message
    assert tool(description="Given.")(no_doc).description == "Given."
