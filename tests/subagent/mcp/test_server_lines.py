"""``subagent mcp``'s own stdio transport (a real subprocess, driven by raw lines): a
request line past MAX_REQUEST, or with more than MAX_VALUES values, is answered
-32600 and skipped, and the next one is served; and the SDK's private call it runs
the server through is checked first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp_types import LATEST_PROTOCOL_VERSION

from subagent._cli._serve_stdio import MAX_REQUEST, lowlevel_run
from subagent.mcp._framing import MAX_VALUES, Lines

from .helpers import PATIENCE


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


@pytest.mark.slow
async def test_an_over_long_or_too_many_valued_request_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "specs.toml").write_text(
        '[agents.greeter]\ndescription = "Greets."\nmodel = "scripted:greeter.json"\n'
    )
    (tmp_path / "greeter.json").write_text(json.dumps([{"content": "hello"}]))
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "subagent", "mcp", str(tmp_path / "specs.toml"),
         "--ledger", str(tmp_path / "ledger.jsonl")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path,
    )
    assert process.stdin is not None and process.stdout is not None
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}
    requests = (
        # Past the bound by one byte, and a JSON request at that: it is never read.
        line({"jsonrpc": "2.0", "id": 7, "method": "ping", "pad": "x" * MAX_REQUEST})
        + b"[" + b"{}," * MAX_VALUES + b"{}]\n"
        + line(initialize)
        + line({"jsonrpc": "2.0", "method": "notifications/initialized"})
        + line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    )
    answers: list[Any] = []
    lines = Lines(MAX_REQUEST)
    with trio.fail_after(PATIENCE):
        await process.stdin.send_all(requests)
        while len(answers) < 4:
            chunk = await process.stdout.receive_some(65536)
            assert chunk, answers
            answers += [json.loads(x) for x in lines.feed(chunk) if x is not None]
        await process.stdin.aclose()
        assert await process.wait() == 0
    assert answers[0] == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600,
        "message": "the request is longer than 4194304 bytes (MAX_REQUEST); it was skipped"}}
    assert answers[1] == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "the request holds more than 65536 JSON values (MAX_VALUES); "
        "it was skipped"}}
    assert answers[2]["id"] == 1 and "result" in answers[2]
    assert answers[3]["id"] == 2
    assert [t["name"] for t in answers[3]["result"]["tools"]] == ["greeter"]


def test_the_sdks_private_run_is_checked_before_serving() -> None:
    from mcp.server.mcpserver import MCPServer

    assert callable(lowlevel_run(MCPServer("x")))

    class Changed:
        _lowlevel_server = object()  # a later SDK, without run

    for server in (object(), Changed()):
        with pytest.raises(ImportError) as info:
            lowlevel_run(server)
        assert str(info.value) == (
            "subagent mcp needs the mcp SDK's MCPServer._lowlevel_server.run (mcp 2.x); "
            "the installed version has none")


async def test_a_request_nested_past_the_parsers_is_answered_and_skipped() -> None:
    # pydantic refuses the line (ValueError); telling "not JSON" from "not JSON-RPC"
    # then ran json.loads, whose RecursionError ended ``subagent mcp`` (exit 1).
    import os

    from subagent._cli._serve_stdio import bounded_stdio_server

    client_in, server_in = os.pipe()
    server_out, client_out = os.pipe()
    deep = b"[" * 5_000 + b"\n"
    ping = line({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    try:
        with trio.fail_after(PATIENCE):
            async with bounded_stdio_server(client_in, client_out) as (read_stream, _), \
                    read_stream:
                await trio.to_thread.run_sync(os.write, server_in, deep + ping)
                message = await read_stream.receive()
                answer = await trio.to_thread.run_sync(os.read, server_out, 65536)
                os.close(server_in)
    finally:
        for fd in (client_in, server_out, client_out):
            os.close(fd)
    assert json.loads(answer) == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32700,
        "message": "the request is nested too deeply to parse; it was skipped"}}
    assert message.message.id == 3


async def test_a_clients_cancels_are_told_before_the_end_of_stdin() -> None:
    # ``subagent mcp`` tells a call its client cancelled (caller) from one a client
    # gone leaves (pool_closed) by these, whatever order its tasks then run in.
    import os

    from subagent._cli._serve_stdio import bounded_stdio_server

    told: list[str] = []

    def cancel(id: object) -> bytes:
        return line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": id, "reason": "quit"}})

    client_in, server_in = os.pipe()
    server_out, client_out = os.pipe()
    try:
        with trio.fail_after(PATIENCE):
            async with bounded_stdio_server(
                client_in, client_out, lambda: told.append("eof"), told.append
            ) as (read_stream, _), read_stream:
                await trio.to_thread.run_sync(
                    os.write, server_in,
                    cancel(2) + cancel("a-7") + cancel(True) + cancel(None)
                    + line({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
                )
                os.close(server_in)
                got = [await read_stream.receive() for _ in range(5)]
                async for _ in read_stream:
                    pass  # the end of stdin
    finally:
        for fd in (client_in, server_out, client_out):
            os.close(fd)
    assert told == ["2", "a-7", "eof"]
    assert got[-1].message.id == 3
