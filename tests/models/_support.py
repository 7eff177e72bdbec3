"""What the adapter tests share: a tool to offer and delta sinks."""

from __future__ import annotations

from agentcore import ToolSpec

WEATHER = ToolSpec(
    "weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


class Deltas(list[str]):
    """A delta sink that keeps the deltas it is given, in order."""

    async def __call__(self, text: str) -> None:
        self.append(text)


async def ignore(text: str) -> None:
    """A delta sink that drops them."""
