"""The peer fault matrix's ``mcp_client`` row: a client misbehaving toward ``subagent
mcp`` (a real subprocess over its stdio). Its agents: ``greeter`` (a scripted model)
and ``slow``, an OpenAI-compatible model on a loopback server in this process that
never answers, so that a call is in flight when the client misbehaves. Real time,
bounded by ``DEADLINE``; the ledger is a JSONL file, verified after the server exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from mcp_types import LATEST_PROTOCOL_VERSION

import ledger
from subagent._cli._serve_stdio import MAX_REQUEST
from subagent.mcp._framing import Lines

from .cellkit import check_levels
from .matrix import cells

DEADLINE = 60.0
#: Seconds between the bytes of a dripped request (1 s a byte would take a minute).
DRIP = 0.02


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def call(id: int, agent: str) -> bytes:
    return line({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                 "params": {"name": agent, "arguments": {"task": "go"}}})


INITIALIZE = line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
    "clientInfo": {"name": "raw", "version": "1"}}}) + line(
    {"jsonrpc": "2.0", "method": "notifications/initialized"})


@attrs.define
class Seen:
    """What a cell saw: the answers by id (errors as ``error: message``), the exit code,
    the ledger's verdict and the kinds of its ``slow`` entries."""

    answers: dict[Any, str] = attrs.Factory(dict)
    code: int | None = None
    ledger_ok: bool = False
    slow: list[str] = attrs.Factory(list)


async def hang(requested: trio.Event, stream: trio.SocketStream) -> None:
    async with stream:
        await stream.receive_some()
        requested.set()
        await trio.sleep_forever()


async def play(fault: str, tmp: Path) -> Seen:
    seen = Seen()
    requested = trio.Event()
    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(partial(trio.serve_tcp, partial(hang, requested), 0,
                                                 host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        (tmp / "specs.toml").write_text(
            '[agents.greeter]\ndescription = "Greets."\nmodel = "scripted:greeter.json"\n'
            '[agents.slow]\ndescription = "Never answers."\nmodel = "openai:gpt-test"\n')
        (tmp / "greeter.json").write_text(json.dumps([{"content": "hello"}] * 4))
        env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}",
               "OPENAI_API_KEY": "sk-test-0000"}
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "subagent", "mcp", str(tmp / "specs.toml"),
             "--ledger", str(tmp / "ledger.jsonl")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=tmp, env=env)
        assert process.stdin is not None and process.stdout is not None
        lines = Lines(MAX_REQUEST)

        async def until(id: Any) -> None:
            assert process.stdout is not None
            while id not in seen.answers:
                chunk = await process.stdout.receive_some(65536)
                assert chunk, seen.answers
                for text in lines.feed(chunk):
                    if text is None:
                        continue
                    message = json.loads(text)
                    if "id" not in message:
                        continue  # a notification (progress)
                    answer = message.get("result") or message.get("error")
                    seen.answers[message["id"]] = (
                        answer["content"][0]["text"] if "content" in answer
                        else f"error: {answer.get('message')}" if "error" in message
                        else "ok")

        with trio.fail_after(DEADLINE):
            await process.stdin.send_all(INITIALIZE)
            await until(1)
            await misbehave(fault, process, requested, until, seen)
            if fault in ("garbage", "oversized", "drips", "hangs"):
                # The other agent goes on: the next request is served.
                await process.stdin.send_all(call(9, "greeter"))
                await until(9)
            if process.stdin is not None:
                with trio.move_on_after(0):
                    await process.stdin.aclose()
            seen.code = await process.wait()
        nursery.cancel_scope.cancel()
    report = ledger.verify(tmp / "ledger.jsonl")
    seen.ledger_ok = report.ok
    entries = map(json.loads, (tmp / "ledger.jsonl").read_text().splitlines())
    seen.slow = [entry["kind"] for entry in entries if entry["agent_id"] == "slow"]
    return seen


async def misbehave(fault: str, process: trio.Process, requested: trio.Event,
                    until: Any, seen: Seen) -> None:
    assert process.stdin is not None and process.stdout is not None
    if fault == "garbage":
        await process.stdin.send_all(b"\x00\xff{not json at all\n")
        await until(None)
        assert seen.answers.pop(None) == "error: the request is not JSON; it was skipped"
        await process.stdin.send_all(b'{"jsonrpc": "2.0", "id": 5, "method": 7}\n')
    elif fault == "oversized":
        await process.stdin.send_all(b'{"pad": "' + b"x" * MAX_REQUEST + b'"}\n')
    elif fault == "drips":
        for byte in call(2, "greeter"):
            await process.stdin.send_all(bytes([byte]))
            await trio.sleep(DRIP)
        await until(2)
    elif fault == "killed_between_calls":
        await process.stdin.send_all(call(2, "greeter"))
        await until(2)
        # Killed while idle: both pipes close.
        await process.stdin.aclose()
        await process.stdout.aclose()
    else:
        # A call in flight: the slow agent's model call has reached its server.
        await process.stdin.send_all(call(2, "slow"))
        await requested.wait()
        if fault == "hangs":
            # The client gives up on the call (notifications/cancelled), as the SDK does.
            await process.stdin.send_all(line({
                "jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 2, "reason": "client timeout"}}))
        elif fault == "closes_early":
            await process.stdin.aclose()
        elif fault == "killed_mid_call":
            await process.stdin.aclose()
            await process.stdout.aclose()


CANCELLED = ["task_queued", "task_started", "prompt", "abort", "run_end", "task_cancelled"]
#: fault: the answers by request id (1: initialize, 2: the call the fault is about,
#: 9: the next call, after the fault; None: an error without an id), and the ledger
#: entries of the ``slow`` agent's run (cancelled when the client went away or gave up
#: during its call). Every cell: exit code 0 and a sound ledger.
EXPECTED: dict[str, tuple[dict[Any, str], list[str]]] = {
    # Its pipes closed mid-call: the run is cancelled and audited, the server exits 0.
    "killed_mid_call": ({1: "ok"}, CANCELLED),
    "killed_between_calls": ({1: "ok", 2: "hello"}, []),
    # notifications/cancelled: that run is cancelled; the next call is served.
    "hangs": ({1: "ok", 9: "hello"}, CANCELLED),
    "drips": ({1: "ok", 2: "hello", 9: "hello"}, []),
    # A line that is not JSON is answered -32700 (checked in misbehave()), one that is
    # no JSON-RPC message -32600, both to id null; the next request is served.
    "garbage": ({1: "ok", None: "error: the request is not a JSON-RPC message; it was "
                 "skipped", 9: "hello"}, []),
    "oversized": ({1: "ok", None: "error: the request is longer than 4194304 bytes "
                   "(MAX_REQUEST); it was skipped", 9: "hello"}, []),
    # stdin ends with a call in flight: cancelled, audited, exit 0.
    "closes_early": ({1: "ok"}, CANCELLED),
}


@pytest.mark.slow
@pytest.mark.parametrize(("peer", "fault", "moment"), cells("mcp_client"))
def test_mcp_client_cell(peer: str, fault: str, moment: str, tmp_path: Path) -> None:
    seen: list[Seen] = []

    def run() -> None:
        seen.append(trio.run(play, fault, tmp_path))

    check_levels(run)
    answers, slow = EXPECTED[fault]
    assert seen[0] == Seen(answers, 0, True, slow)
