"""An MCP server for the tests, on the SDK's own MCPServer: stdio by default, streamable
HTTP on 127.0.0.1 with ``--http PORT``.

``wait`` writes ``started`` to its marker file, then waits forever; when the call is
cancelled (the client's ``notifications/cancelled``) it writes ``cancelled`` there.
``exit`` ends the process in the middle of its call.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server: MCPServer[object] = MCPServer("fixture")


@server.tool()
async def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
async def wait(marker: str) -> str:
    """Wait forever; say in the marker file when it started and when it was cancelled."""
    Path(marker).write_text("started")  # noqa: ASYNC240 (a few bytes)
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        Path(marker).write_text("cancelled")  # noqa: ASYNC240
        raise
    return "never"


@server.tool()
async def fail(reason: str) -> str:
    """Fail with the reason."""
    raise ToolError(reason)


@server.tool()
async def exit(code: int) -> str:
    """End the server process at once, in the middle of this call."""
    os._exit(code)


@server.tool()
async def big(size: int) -> str:
    """Return ``size`` characters."""
    return "x" * size


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
