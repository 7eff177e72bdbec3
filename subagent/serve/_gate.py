"""The gate of a served pool: what runs at once and what waits for the page."""

from __future__ import annotations

import trio

import agentcore
import subagent


async def approve_on_the_page(request: agentcore.GateRequest) -> agentcore.GateDecision:
    """The server's gate: read-only tools and delegation run, any other call waits for
    an answer on the page (deferred). A checkpoint."""
    await trio.lowlevel.checkpoint()
    if isinstance(request.tool, subagent.SubagentTool):
        return agentcore.GateDecision(True, "delegation")
    if agentcore.is_read_only(request.tool):
        return agentcore.GateDecision(True, "read-only")
    return agentcore.GateDecision.defer(
        f"tool {request.tool.name!r} may change things: approve it on the page")
