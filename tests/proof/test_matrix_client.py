"""The peer fault matrix's ``mcp_client`` row: a client misbehaving toward ``subagent
mcp`` (a real subprocess over its stdio). Its agents: ``greeter`` (a scripted model,
the bystander) and ``slow``, an OpenAI-compatible model on a loopback server in this
process (``peer_models.ModelPeer``) that holds its answer: it never answers when the
client goes away or gives up on the call, and answers "fine" when released after a
fault that must leave the call alone. Real time, bounded by ``DEADLINE``; the ledger
is a JSONL file, verified after the server exits.

Each cell asserts: the bystander's calls are answered while the affected call is in
flight and after the fault (while the client is there); the affected call's answer,
its progress notifications (the events of its run, which the client asked for) and
its ledger entries, exactly; the whole ledger is a sound chain with every answered
call's run in it; the server exits 0; file descriptors and memory come back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from mcp_types import LATEST_PROTOCOL_VERSION

import ledger
from subagent._cli._serve_stdio import FLUSH, MAX_REQUEST
from subagent.mcp._framing import Lines

from .cellkit import check_levels
from .matrix import cells
from .peer_models import Behaviour, ModelPeer

DEADLINE = 60.0
#: Seconds between the bytes of a dripped request (1 s a byte would take a minute).
DRIP = 0.02


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def call(id: int, agent: str, *, progress: bool = False) -> bytes:
    params: dict[str, Any] = {"name": agent, "arguments": {"task": "go"}}
    if progress:
        params["_meta"] = {"progressToken": id}
    return line({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})


INITIALIZE = line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
    "clientInfo": {"name": "raw", "version": "1"}}}) + line(
    {"jsonrpc": "2.0", "method": "notifications/initialized"})


@attrs.define
class Seen:
    """What a cell saw: the answers in the order they came (``(id, text)``; an error
    as ``error: message``), the progress messages of the affected call (id 2), the exit
    code, the ledger's verdict, its entries as ``(path, kind, error)``, and the seconds
    from the fault to the affected run's ``abort`` entry (-1: none)."""

    answers: list[tuple[Any, str]] = attrs.Factory(list)
    progress: list[str] = attrs.Factory(list)
    code: int | None = None
    ledger_ok: bool = False
    entries: list[tuple[str, str, str | None]] = attrs.Factory(list)
    aborted_after: float = -1.0


@attrs.define(eq=False)
class Client:
    """The misbehaving client: ``subagent mcp``'s stdin and stdout."""

    process: trio.Process
    seen: Seen
    lines: Lines = attrs.Factory(lambda: Lines(MAX_REQUEST))

    async def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data)

    async def until(self, id: Any) -> None:
        """Read until the answer to ``id`` has come (None: an error without an id)."""
        while not any(got == id for got, _ in self.seen.answers):
            assert await self._read(), self.seen.answers

    async def until_end(self) -> None:
        """Read until the server closes stdout."""
        while await self._read():
            pass

    async def _read(self) -> bool:
        assert self.process.stdout is not None
        chunk = await self.process.stdout.receive_some(65536)
        for text in self.lines.feed(chunk):
            assert text is not None
            message = json.loads(text)
            if message.get("method") == "notifications/progress":
                assert message["params"]["progressToken"] == 2, message
                self.seen.progress.append(message["params"]["message"])
            elif "id" in message:
                answer = message.get("result") or message["error"]
                self.seen.answers.append((message["id"], (
                    answer["content"][0]["text"] if "content" in answer
                    else f"error: {answer['message']}" if "error" in message
                    else "ok")))
        return bool(chunk)

    async def kill(self) -> None:
        """Both pipes closed at once, as when the client process dies."""
        assert self.process.stdin is not None and self.process.stdout is not None
        await self.process.stdin.aclose()
        await self.process.stdout.aclose()


async def play(fault: str, tmp: Path) -> Seen:
    seen = Seen()
    peer = ModelPeer("openai")
    async with trio.open_nursery() as nursery:
        await nursery.start(peer.run)
        (tmp / "specs.toml").write_text(
            '[agents.greeter]\ndescription = "Greets."\nmodel = "scripted:greeter.json"\n'
            '[agents.slow]\ndescription = "Answers when let."\nmodel = "openai:gpt-test"\n')
        (tmp / "greeter.json").write_text(json.dumps([{"content": "hello"}] * 4))
        env = {**os.environ, "OPENAI_BASE_URL": peer.url, "OPENAI_API_KEY": "sk-test-0000"}
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "subagent", "mcp", str(tmp / "specs.toml"),
             "--ledger", str(tmp / "ledger.jsonl")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=tmp, env=env)
        client = Client(process, seen)
        with trio.fail_after(DEADLINE):
            await client.send(INITIALIZE)
            await client.until(1)
            fault_at = await misbehave(fault, client, peer)
            if fault not in ("killed_mid_call", "killed_between_calls"):
                if fault != "closes_early":
                    # The client is still there: the next request is served.
                    await client.send(call(9, "greeter"))
                    await client.until(9)
                    assert process.stdin is not None
                    await process.stdin.aclose()
                await client.until_end()
            seen.code = await process.wait()
        nursery.cancel_scope.cancel()
    seen.ledger_ok = ledger.verify(tmp / "ledger.jsonl").ok
    entries = [json.loads(text) for text in (tmp / "ledger.jsonl").read_text().splitlines()]
    seen.entries = [("/".join(e["path"]), e["kind"], e["error"]) for e in entries]
    for entry in entries:
        if entry["kind"] == "abort":
            seen.aborted_after = datetime.fromisoformat(entry["time"]).timestamp() - fault_at
    return seen


async def misbehave(fault: str, client: Client, peer: ModelPeer) -> float:
    """The fault, at its moment; returns the (wall clock) time of the fault."""
    if fault == "killed_between_calls":
        await client.send(call(2, "greeter", progress=True))
        await client.until(2)
        # Killed while idle: both pipes close.
        fault_at = time.time()
        await client.kill()
        return fault_at
    # A call in flight: the slow agent's model call has reached its server.
    peer.behaviour = (Behaviour.hang if fault in ("killed_mid_call", "hangs", "closes_early")
                      else Behaviour.held)
    await client.send(call(2, "slow", progress=True))
    await peer.requested.wait()
    # The bystander goes on while it is in flight.
    await client.send(call(3, "greeter"))
    await client.until(3)
    fault_at = time.time()
    if fault == "garbage":
        await client.send(b"\x00\xff{not json at all\n")
        await client.until(None)
        await client.send(b'{"jsonrpc": "2.0", "id": 5, "method": 7}\n')
        await client.until(None)
    elif fault == "oversized":
        await client.send(b'{"pad": "' + b"x" * MAX_REQUEST + b'"}\n')
        await client.until(None)
    elif fault == "drips":
        for byte in call(4, "greeter"):
            await client.send(bytes([byte]))
            await trio.sleep(DRIP)
        await client.until(4)
    elif fault == "hangs":
        # The client gives up on the call (notifications/cancelled), as the SDK does.
        await client.send(line({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 2, "reason": "client timeout"}}))
    elif fault == "closes_early":
        assert client.process.stdin is not None
        await client.process.stdin.aclose()
    else:
        assert fault == "killed_mid_call"
        await client.kill()
    if peer.behaviour is Behaviour.held:
        # The call in flight was left alone by the fault: it answers once let.
        peer.release.set()
        await client.until(2)
    return fault_at


HELLO = ["task_queued", "task_started", "prompt", "model_response", "run_end",
         "task_finished"]
FINE = HELLO
CANCELLED = ["task_queued", "task_started", "prompt", "abort", "run_end", "task_cancelled"]
#: The progress notifications of a call until its model request.
REQUESTED = [f"slow/0001: {kind}" for kind in
             ("task_queued", "task_started", "agent_start", "turn_start", "model_request")]
ANSWERED = [*REQUESTED, *(f"slow/0001: {kind}" for kind in
                          ("model_delta", "model_response", "agent_end", "task_finished"))]
#: The slow run's ``abort`` entry, by fault: who cancelled it. The client's cancel is
#: the caller's; a client gone (stdin ended) ends the server, which cancels its pool.
ABORT = {
    "hangs": "cancelled (caller): Task.cancel() of it or of a task above it",
    "killed_mid_call": "cancelled (pool_closed): the pool was cancelled",
    "closes_early": "cancelled (pool_closed): the pool was cancelled",
}


#: fault: the answers in order (1: initialize, 2: the affected call, 3, 4, 9: the
#: bystander's calls; None: an error without an id), the affected call's progress
#: messages, and the ledger's kinds by run (runs interleave), its slow run's ``abort``
#: (if any) saying ABORT[fault].
EXPECTED: dict[str, tuple[list[tuple[Any, str]], list[str], dict[str, list[str]]]] = {
    # Its pipes closed mid-call: the run is cancelled and audited, the server exits 0.
    "killed_mid_call": (
        [(1, "ok"), (3, "hello")], REQUESTED,
        {"slow/0001": CANCELLED, "greeter/0002": HELLO}),
    "killed_between_calls": (
        [(1, "ok"), (2, "hello")],
        [f"greeter/0001: {kind}" for kind in (
            "task_queued", "task_started", "agent_start", "turn_start", "model_request",
            "model_delta", "model_response", "agent_end", "task_finished")],
        {"greeter/0001": HELLO}),
    # notifications/cancelled: that run is cancelled (no answer, as MCP says); the next
    # call is served.
    "hangs": (
        [(1, "ok"), (3, "hello"), (9, "hello")], REQUESTED,
        {"slow/0001": CANCELLED, "greeter/0002": HELLO, "greeter/0003": HELLO}),
    # A request dripped in is served when its line is whole; the call in flight goes on.
    "drips": (
        [(1, "ok"), (3, "hello"), (4, "hello"), (2, "fine"), (9, "hello")], ANSWERED,
        {"slow/0001": FINE, "greeter/0002": HELLO, "greeter/0003": HELLO,
         "greeter/0004": HELLO}),
    # A line that is not JSON is answered -32700, one that is no JSON-RPC message
    # -32600, both to id null; the call in flight and the next request go on.
    "garbage": (
        [(1, "ok"), (3, "hello"), (None, "error: the request is not JSON; it was skipped"),
         (None, "error: the request is not a JSON-RPC message; it was skipped"),
         (2, "fine"), (9, "hello")], ANSWERED,
        {"slow/0001": FINE, "greeter/0002": HELLO, "greeter/0003": HELLO}),
    "oversized": (
        [(1, "ok"), (3, "hello"),
         (None, "error: the request is longer than 4194304 bytes (MAX_REQUEST); it was "
          "skipped"), (2, "fine"), (9, "hello")], ANSWERED,
        {"slow/0001": FINE, "greeter/0002": HELLO, "greeter/0003": HELLO}),
    # stdin ends with a call in flight: cancelled (no answer), audited, exit 0.
    "closes_early": (
        [(1, "ok"), (3, "hello")], REQUESTED,
        {"slow/0001": CANCELLED, "greeter/0002": HELLO}),
}


@pytest.mark.slow
@pytest.mark.parametrize(("peer", "fault", "moment"), cells("mcp_client"))
def test_mcp_client_cell(peer: str, fault: str, moment: str, tmp_path: Path) -> None:
    seen: list[Seen] = []

    def run() -> None:
        seen.append(trio.run(play, fault, tmp_path))

    check_levels(run, peer)
    [got] = seen
    answers, progress, entries = EXPECTED[fault]
    assert got.answers == answers
    assert got.progress == progress
    by_run: dict[str, list[str]] = {}
    for path, kind, _ in got.entries:
        by_run.setdefault(path, []).append(kind)
    assert by_run == entries
    errors = [(path, kind, error) for path, kind, error in got.entries if error is not None]
    cancelled = "abort" in entries.get("slow/0001", [])
    assert errors == ([("slow/0001", "abort", ABORT[fault])] if cancelled else [])
    # The affected run ends at once: its abort is written as soon as the server reads
    # the cancel or the end of stdin (FLUSH bounds what is written after that).
    assert (0 <= got.aborted_after < FLUSH) if cancelled else got.aborted_after == -1
    assert got.code == 0
    assert got.ledger_ok
