"""Hostile streamable-HTTP MCP servers (a hand-written one on 127.0.0.1): every reply the
pool reads from one is bounded, compressed or not."""

from __future__ import annotations

import gzip
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from subagent import Event, EventKind, Stream, open_pool
from subagent.mcp import McpServer, McpServerError, McpToolError
from subagent.mcp._http import MAX_HTTP_MESSAGE

from ..helpers import drain
from ._hostile_http import Answer, HostileMcp, chunk, head, json_answer, result, start

TOOLS = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}


async def endless(stream: trio.SocketStream, request_id: Any) -> None:
    # Blank space (valid before a JSON answer) in chunks, forever: the SDK would read
    # it all into memory.
    await stream.send_all(head(200, "Content-Type: application/json"))
    while True:
        await stream.send_all(chunk(b" " * 65536))


def compressed(layers: int) -> Callable[[trio.SocketStream, Any], Awaitable[None]]:
    async def answer(stream: trio.SocketStream, request_id: Any) -> None:
        body = result(request_id, TOOLS)
        for _ in range(layers):
            body = gzip.compress(body)
        encoding = ", ".join(["gzip"] * layers)
        await json_answer(stream, body, f"Content-Encoding: {encoding}")

    return answer


async def listing_errors(answer: Callable[[trio.SocketStream, Any], Awaitable[None]]) -> list[str]:
    stream = Stream(100)
    async with trio.open_nursery() as nursery:
        server = await start(nursery, HostileMcp({"tools/list": answer}))
        hostile = McpServer("h", url=server.url, start_timeout=30.0)
        async with open_pool(mcp=[hostile], events=stream) as pool:
            assert pool.mcp is not None
            assert not pool.mcp.is_up("h")
        nursery.cancel_scope.cancel()
    stream.close()
    events: list[Event] = await drain(stream)
    return [e.error or "" for e in events if e.kind is EventKind.mcp_server_error]


async def test_a_reply_larger_than_one_message_is_refused() -> None:
    [error, *_] = await listing_errors(endless)
    assert error == (
        "MCP server 'h' failed: MCPError: Failed to parse JSON response: "
        f"the reply is larger than {MAX_HTTP_MESSAGE} bytes"
    )


@pytest.mark.parametrize("layers", [1, 2])
async def test_a_compressed_reply_is_refused(layers: int) -> None:
    # Decoded by the HTTP client before any count: a few KB of gzip inside gzip
    # inflate to GBs.
    [error, *_] = await listing_errors(compressed(layers))
    assert error == (
        "MCP server 'h' failed: MCPError: Failed to parse JSON response: "
        "the reply is compressed (Content-Encoding), which is refused"
    )


TOKEN = "mcp-secret-token-0123456789"


def echoing(request_id: Any) -> bytes:
    error = {"code": -32602, "message": f"bad header: Authorization: Bearer {TOKEN}!"}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


async def echo_tools(stream: trio.SocketStream, request_id: Any) -> None:
    await json_answer(stream, result(request_id, TOOLS))


async def echo_error(stream: trio.SocketStream, request_id: Any) -> None:
    await json_answer(stream, echoing(request_id))


async def test_a_header_value_a_server_echoes_is_masked() -> None:
    stream = Stream(100)
    async with trio.open_nursery() as nursery:
        answers: dict[str, Answer] = {"tools/list": echo_tools, "tools/call": echo_error}
        server = await start(nursery, HostileMcp(answers))
        hostile = McpServer("h", url=server.url, headers={"Authorization": f"Bearer {TOKEN}"})
        failing = await start(nursery, HostileMcp({"initialize": echo_error}))
        broken = McpServer("b", url=failing.url, headers={"X-Key": TOKEN})
        async with open_pool(mcp=[hostile, broken], events=stream) as pool:
            [echo] = pool.mcp_tools("h", "echo")
            with pytest.raises(McpServerError) as info:
                await echo.execute('{"text": "x"}')
        nursery.cancel_scope.cancel()
    assert str(info.value) == (
        "MCP server 'h' refused the call: bad header: Authorization: ***!"
    )
    stream.close()
    [error, *_] = [e.error for e in await drain(stream) if e.kind is EventKind.mcp_server_error]
    assert error == "MCP server 'b' failed: MCPError: bad header: Authorization: Bearer ***!"


async def echo_result(stream: trio.SocketStream, request_id: Any) -> None:
    text = f"no access for {TOKEN}"
    value = {"content": [{"type": "text", "text": text}], "isError": True}
    await json_answer(stream, result(request_id, value))


async def test_a_header_value_echoed_in_a_result_is_masked() -> None:
    async with trio.open_nursery() as nursery:
        answers: dict[str, Answer] = {"tools/list": echo_tools, "tools/call": echo_result}
        server = await start(nursery, HostileMcp(answers))
        hostile = McpServer("h", url=server.url, headers={"Authorization": f"Bearer {TOKEN}"})
        async with open_pool(mcp=[hostile]) as pool:
            [echo] = pool.mcp_tools("h", "echo")
            with pytest.raises(McpToolError) as info:
                await echo.execute('{"text": "x"}')
        nursery.cancel_scope.cancel()
    assert str(info.value) == "MCP server 'h': no access for ***"


def test_a_result_is_masked_before_it_is_cut() -> None:
    # The token straddles the cut: masked first, no part of it is left.
    import mcp_types

    from subagent.mcp._client import MAX_RESULT, result_text

    text = "x" * (MAX_RESULT - 10) + TOKEN + "y" * 20
    value = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)])
    server = McpServer("h", url="http://127.0.0.1:1/mcp", headers={"X-Key": TOKEN})
    cut = f"\n[cut: the result is longer than {MAX_RESULT} characters]"
    assert result_text(value, server.masked) == "x" * (MAX_RESULT - 10) + "***" + "y" * 7 + cut
    assert TOKEN[:10] in result_text(value)  # unmasked, the cut keeps a part of it
