"""MCP both ways: MCP servers as the pool's tool sources, and the pool as an MCP server.

Needs the ``mcp`` extra (``pip install 'subagent[mcp]'``) to connect or to serve;
declaring servers does not.
"""

from ._config import McpServer as McpServer
from ._config import McpServerError as McpServerError
from ._config import McpToolError as McpToolError
from ._framing import McpMessageError as McpMessageError
from ._sessions import McpSessions as McpSessions
from ._sessions import open_mcp_sessions as open_mcp_sessions
from ._tools import McpTool as McpTool
