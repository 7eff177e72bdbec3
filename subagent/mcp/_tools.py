"""MCP tools as agentcore tools: what a spec's ``"mcp:NAME"`` / ``"mcp:NAME/TOOL"`` and
``pool.mcp_tools(NAME)`` give a run.

An MCP tool is an ordinary opaque tool: the calling run's gate, hooks, audit, events
and ``tool_timeout`` apply to it, at that run's path. It is read-only only when the
server's config says so (``read_only``); the server's own annotations are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ._client import describe_tool, result_text, schema_of
from ._config import McpServer, McpToolError

if TYPE_CHECKING:
    import mcp_types


class ToolCaller(Protocol):
    """What a tool needs of the pool's sessions (:class:`McpSessions`): a call."""

    async def call(
        self, name: str, tool: str, arguments: dict[str, Any]
    ) -> mcp_types.CallToolResult: ...


@attrs.frozen(eq=False)
class McpTool:
    """One tool of one MCP server, called through the pool's session with it.

    Attributes:
      name: The tool's name on the server (the name the model calls it by).
      description: The server's description, cut to 4096 characters.
      parameters: The server's input schema.
      server: The server's name.
      read_only: Whether the server's config lists the tool in ``read_only``.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    server: str
    read_only: bool
    _sessions: ToolCaller = attrs.field(repr=False)
    #: Masks the server's configured env and header values in its text (McpServer.masked).
    _masked: Callable[[str], str] = attrs.field(default=str, repr=False)

    @classmethod
    def from_listing(
        cls, sessions: ToolCaller, server: McpServer, tool: mcp_types.Tool
    ) -> McpTool:
        """The tool as the server listed it."""
        return cls(
            tool.name,
            describe_tool(server.name, tool, server.masked),
            schema_of(tool, server.masked),
            server.name,
            tool.name in server.read_only,
            sessions,
            server.masked,
        )

    async def execute(self, arguments: str) -> str:
        """Call the tool on its server. A checkpoint; cancelling it cancels the call.

        Raises:
          McpServerError: the server is not running or failed during the call.
          McpToolError: the server answered with an error result (its text).
        """
        value = json.loads(arguments)
        result = await self._sessions.call(self.server, self.name, value)
        text = result_text(result, self._masked)
        if result.is_error:
            raise McpToolError(f"MCP server {self.server!r}: {text}")
        return text


def placeholder(sessions: ToolCaller, server: McpServer, name: str) -> McpTool:
    """A stand-in for tool ``name`` of a server that has not listed its tools yet: an
    open schema, and calls that go to the server once it runs."""
    return McpTool(
        name,
        f"The {name} tool of MCP server {server.name} (not started yet).",
        {"type": "object"},
        server.name,
        name in server.read_only,
        sessions,
        server.masked,
    )
