"""The Tool protocol, liveness classes, and a tool made from an async function."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from ._messages import ToolSpec


class Liveness(enum.StrEnum):
    """How a tool call's liveness is bounded.

    ``opaque`` tools (the default) are bounded by the calling loop's ``tool_timeout``.
    ``self_monitoring`` tools bound themselves and always return a terminal result,
    so the loop does not time them (the delegation tool is one).
    """

    opaque = "opaque"
    self_monitoring = "self_monitoring"


@runtime_checkable
class Tool(Protocol):
    """Something a model can call.

    ``execute`` takes the arguments as JSON text and returns the result text; raising
    produces an error result the model sees. Optional attributes: ``read_only``
    (default False: the tool may change things) and ``liveness`` (default opaque).
    """

    @property
    def name(self) -> str:
        """The name the model calls it by (unique within an agent)."""
        ...

    @property
    def description(self) -> str:
        """What it does, for the model."""
        ...

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON schema of its arguments."""
        ...

    async def execute(self, arguments: str) -> str:
        """Run one call: JSON argument text in, result text out."""
        ...


def is_read_only(tool: Tool) -> bool:
    """Whether ``tool`` declares itself free of side effects."""
    return bool(getattr(tool, "read_only", False))


def liveness_of(tool: Tool) -> Liveness:
    """The liveness class ``tool`` declares (opaque when it declares none)."""
    return Liveness(getattr(tool, "liveness", Liveness.opaque))


def tool_spec(tool: Tool) -> ToolSpec:
    """The :class:`ToolSpec` that describes ``tool`` to a model."""
    return ToolSpec(tool.name, tool.description, tool.parameters)


@attrs.frozen(eq=False)
class FunctionTool:
    """A tool whose ``execute`` is an async function of the JSON argument text.

    Example::

        async def echo(arguments: str) -> str:
            return arguments
        tool = FunctionTool("echo", "Echo the arguments.", {"type": "object"}, echo)
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: Callable[[str], Awaitable[str]]
    read_only: bool = False
    liveness: Liveness = Liveness.opaque

    async def execute(self, arguments: str) -> str:
        """Run the function. A checkpoint if the function is."""
        return await self.fn(arguments)
