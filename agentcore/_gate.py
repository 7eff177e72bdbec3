"""The tool gate: a decision per tool call, before it runs, and the stock gates."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
import trio

from ._messages import AgentPath, ToolCall
from ._tools import Tool, is_read_only


@attrs.frozen(slots=True)
class GateRequest:
    """What a gate is asked about: which run (by AgentPath) wants to call which tool, how."""

    path: AgentPath
    tool: Tool
    call: ToolCall


@attrs.frozen(slots=True)
class GateDecision:
    """A gate's answer: ``allowed``, and the ``reason`` (shown to the model on a denial)."""

    allowed: bool
    reason: str = ""


#: A tool gate: any async callable from a request to a decision.
ToolGate = Callable[[GateRequest], Awaitable[GateDecision]]

ALLOW = GateDecision(True, "allowed")


async def allow_all(request: GateRequest) -> GateDecision:
    """A gate that allows every call. A checkpoint."""
    await trio.lowlevel.checkpoint()
    return ALLOW


async def deny_all(request: GateRequest) -> GateDecision:
    """A gate that denies every call. A checkpoint."""
    await trio.lowlevel.checkpoint()
    return GateDecision(False, f"tool {request.tool.name!r} is not allowed: every tool is denied")


async def read_only(request: GateRequest) -> GateDecision:
    """A gate that allows tools declaring ``read_only = True`` and denies the rest.

    A checkpoint.
    """
    await trio.lowlevel.checkpoint()
    if is_read_only(request.tool):
        return GateDecision(True, "read-only tool")
    return GateDecision(
        False, f"tool {request.tool.name!r} may change things and only read-only tools are allowed"
    )


#: An approver: asked about one call, answers True to allow.
Approver = Callable[[GateRequest], Awaitable[bool]]


@attrs.define(eq=False)
class ApprovalGate:
    """A gate that asks an async approver and denies if it does not answer in time.

    Args:
      approver: Awaited with the request; returns True to allow.
      timeout: Seconds to wait for the approver (default 60); no answer by then denies.

    Calling the gate is a checkpoint.
    """

    approver: Approver
    timeout: float = 60.0

    async def __call__(self, request: GateRequest) -> GateDecision:
        with trio.move_on_after(self.timeout):
            if await self.approver(request):
                return GateDecision(True, "approved")
            return GateDecision(False, f"the approver refused tool {request.tool.name!r}")
        return GateDecision(
            False, f"no approval for tool {request.tool.name!r} within {self.timeout:g}s"
        )
