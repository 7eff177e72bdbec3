"""The Tool protocol, liveness classes, and a tool made from an async function."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from .._errors import ConfigurationError
from .._messages import ToolSpec


class Liveness(enum.StrEnum):
    """How a tool call's liveness is bounded.

    ``opaque`` tools (the default) are bounded by the calling loop's ``tool_timeout``:
    a call still running then gets a timed-out error result and the run goes on.
    ``self_monitoring`` tools bound themselves and always return a terminal result,
    so the loop does not time them (the delegation tool is one); they implement
    :class:`SelfMonitoring`, which the Agent checks at construction.
    """

    opaque = "opaque"
    self_monitoring = "self_monitoring"


@runtime_checkable
class Tool(Protocol):
    """Something a model can call.

    ``execute`` takes the arguments as JSON text and returns the result text; raising
    produces an error result the model sees. Optional attributes: ``read_only``
    (default False: the tool may change things), ``idempotent`` (default False: a
    call may not safely run twice; crash recovery repeats an interrupted call only
    of a read-only or idempotent tool) and ``liveness`` (default opaque).
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


@runtime_checkable
class SelfMonitoring(Protocol):
    """The contract of a ``self_monitoring`` tool: it bounds its own calls.

    The loop calls :meth:`execute_monitored` instead of ``execute`` and does not
    time it. A tool must declare ``liveness = Liveness.self_monitoring`` exactly
    when it implements this; the Agent refuses any other combination.
    """

    async def execute_monitored(self, arguments: str, fallback_timeout: float) -> str:
        """Run one call to a terminal result (return or raise), never hanging. A checkpoint.

        Args:
          arguments: The JSON argument text.
          fallback_timeout: The calling agent's ``tool_timeout``: the wall-clock bound
            the tool applies to a call that has no bound of its own.
        """
        ...


def check_liveness(tool: Tool) -> Liveness:
    """The liveness class ``tool`` declares, checked against the contract it implements.

    Raises:
      ConfigurationError: it declares an unknown class, declares ``self_monitoring``
        without implementing :class:`SelfMonitoring`, or implements it while
        declaring ``opaque``.
    """
    declared = getattr(tool, "liveness", Liveness.opaque)
    try:
        liveness = Liveness(declared)
    except ValueError:
        raise ConfigurationError(
            f"tool {tool.name!r} declares liveness {declared!r}; "
            "use Liveness.opaque or Liveness.self_monitoring"
        ) from None
    monitors = callable(getattr(tool, "execute_monitored", None))
    if liveness is Liveness.self_monitoring and not monitors:
        raise ConfigurationError(
            f"tool {tool.name!r} declares liveness self_monitoring but does not implement "
            "execute_monitored (the SelfMonitoring contract); declare it opaque to have "
            "the agent's tool_timeout bound it"
        )
    if liveness is Liveness.opaque and monitors:
        raise ConfigurationError(
            f"tool {tool.name!r} implements execute_monitored (the SelfMonitoring contract) "
            "but declares liveness opaque; declare liveness = Liveness.self_monitoring"
        )
    return liveness


def is_read_only(tool: Tool) -> bool:
    """Whether ``tool`` declares itself free of side effects."""
    return bool(getattr(tool, "read_only", False))


def is_idempotent(tool: Tool) -> bool:
    """Whether a call of ``tool`` may safely run again: it declares itself read-only
    or ``idempotent`` (running a call twice has the effect of running it once)."""
    return is_read_only(tool) or bool(getattr(tool, "idempotent", False))


def liveness_of(tool: Tool) -> Liveness:
    """The liveness class ``tool`` declares (opaque when it declares none)."""
    return Liveness(getattr(tool, "liveness", Liveness.opaque))


def tool_spec(tool: Tool) -> ToolSpec:
    """The :class:`ToolSpec` that describes ``tool`` to a model."""
    return ToolSpec(tool.name, tool.description, tool.parameters)


@attrs.frozen(slots=True)
class ToolOutcome:
    """The result text of one tool call and whether it is an error (or a denial)."""

    text: str
    is_error: bool = False
    denied: bool = False


@attrs.frozen(eq=False)
class FunctionTool:
    """A tool whose ``execute`` is an async function of the JSON argument text (opaque).

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
    idempotent: bool = False
    #: Whether ``fn`` may raise ``CallPaused`` and, called again on resume, continues
    #: the run in ``resumed_call_state()`` (see ``CallPaused``).
    resumes_paused_calls: bool = False

    async def execute(self, arguments: str) -> str:
        """Run the function. A checkpoint if the function is."""
        return await self.fn(arguments)
