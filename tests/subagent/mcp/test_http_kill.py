"""A streamable-HTTP MCP server killed while the pool uses it (issue 33, item 1): the
SDK's own server in a subprocess on 127.0.0.1, SIGKILLed mid-call. Its calls get error
results, the pool gets an ``mcp_server_error`` event, other agents go on, and the server
is started again once it is back; a pool that closes as the connection fails ends as a
cancel, never with the transport's error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

from agentcore.testing import ScriptedModel, tool_call_reply
from subagent import EventKind, Spec, Stream, open_pool
from subagent.mcp import McpServer, McpServerError

from ..helpers import drain
from .helpers import FIXTURE, free_port, spawn_http_fixture, wait_for
from .test_client import sse_leak, tool_texts


async def cancel_after(scope: trio.CancelScope, checkpoints: int) -> None:
    for _ in range(checkpoints):
        await trio.lowlevel.checkpoint()
    scope.cancel()


@pytest.mark.slow
async def test_a_pool_cancelled_as_its_servers_connect_fails_ends_as_a_cancel() -> None:
    # Nothing listens on the port, so each start's connect is refused, and the SDK's task
    # group fails with the ConnectError while the scope around the pool is cancelled,
    # at each checkpoint in turn: the group held a Cancelled beside the ConnectError,
    # which passed the supervisor and left open_pool as ExceptionGroup(ConnectError).
    url = f"http://127.0.0.1:{free_port()}/mcp"
    caught = []
    for checkpoints in range(30):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_after, scope, checkpoints)
                async with open_pool(mcp=[McpServer("fx", url=url)]):
                    await trio.sleep_forever()
        caught.append(scope.cancelled_caught)
    assert caught == [True] * 30


@pytest.mark.slow
@sse_leak
async def test_a_server_killed_mid_call_fails_that_call_and_starts_again(
    tmp_path: Path,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    refused = f"failed: ConnectError: all attempts to connect to 127.0.0.1:{port} failed"
    # The ping may instead read the killed server's connection first (a race with the
    # kernel's reset, seen under CI load): either is the server seen gone.
    reset = "failed: ReadError: socket connection broken: [Errno 104] Connection reset by peer"
    marker = tmp_path / "marker"
    waiter = ScriptedModel([tool_call_reply("wait", json.dumps({"marker": str(marker)}), id="w1"),
                            "answered anyway"])
    other = ScriptedModel([tool_call_reply("echo", '{"text": "still here"}', id="e1"), "echoed"])
    local = McpServer("local", command=sys.executable, args=(FIXTURE,))
    stream = Stream(1000)
    server = await spawn_http_fixture(port)
    try:
        async with open_pool(events=stream, mcp=[McpServer("fx", url=url), local]) as pool:
            assert pool.mcp is not None
            mcp = pool.mcp
            pool.register(Spec("waiter", model=waiter, tools=pool.mcp_tools("fx", "wait")))
            pool.register(Spec("other", model=other, tools=pool.mcp_tools("local", "echo")))
            task = await pool.submit("waiter", "wait")
            await wait_for(lambda: marker.exists() and marker.read_text() == "started",
                           "the call runs on the server")
            server.kill()
            await server.wait()
            assert (await task.wait()).output == "answered anyway"
            assert tool_texts(waiter, 1) == [
                "tool 'wait' failed: McpServerError: MCP server 'fx' failed the call: SSE "
                "stream ended without a response; it is being pinged"]
            # The ping finds it gone; meanwhile its tools fail at once, naming it.
            await wait_for(lambda: not mcp.is_up("fx"), "the server is seen gone")
            [echo] = pool.mcp_tools("fx", "echo")
            with pytest.raises(McpServerError) as info:
                await echo.execute('{"text": "x"}')
            assert str(info.value) in {
                f"MCP server 'fx' is not available: {why}" for why in (refused, reset)}
            # Another agent, on another server, goes on.
            assert (await (await pool.submit("other", "echo")).wait()).output == "echoed"
            assert tool_texts(other, 1) == ["still here"]
            # Back on its port, it is started again (after its backoff).
            server = await spawn_http_fixture(port)
            await wait_for(lambda: mcp.is_up("fx"), "started again")
            assert await echo.execute('{"text": "back"}') == "back"
    finally:
        server.kill()
        with trio.CancelScope(shield=True):
            await server.wait()
    stream.close()
    errors = [e.error for e in await drain(stream) if e.kind is EventKind.mcp_server_error]
    assert errors[0] in {f"MCP server 'fx' {why}" for why in (refused, reset)}
    # Every restart after it is refused until the server is back.
    assert set(errors[1:]) <= {f"MCP server 'fx' {refused}"}
