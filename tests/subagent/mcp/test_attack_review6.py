"""Review 6's holes in the MCP client, against a real hostile stdio server
(hostile_stdio.py, a subprocess): a stdio server's configured ``env`` values (its
credentials, as an HTTP server's are its headers) echoed in a refused call or a result
reach the model only masked."""

from __future__ import annotations

import sys

import pytest

from subagent import open_pool
from subagent.mcp import McpServer, McpServerError

from .hostile_stdio import SECRET
from .test_attack_review5 import HOSTILE


async def test_an_env_value_echoed_by_a_stdio_server_is_masked() -> None:
    server = McpServer("h", command=sys.executable, args=(HOSTILE, "echo-env"),
                       env={"API_KEY": SECRET, "MODE": "short"})
    async with open_pool(mcp=[server]) as pool:
        [echo] = pool.mcp_tools("h", "echo")
        assert await echo.execute('{"text": "x"}') == "key is ***"
        with pytest.raises(McpServerError) as info:
            await echo.execute('{"refuse": true}')
    assert str(info.value) == "MCP server 'h' refused the call: bad key ***"
    assert server.masked(f"{SECRET} short") == "*** short"
