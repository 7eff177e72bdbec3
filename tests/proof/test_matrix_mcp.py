"""The peer fault matrix's MCP servers (``matrix.GRIDS["mcp_stdio"]`` and
``["mcp_http"]``): the SDK's own server (``tests/subagent/mcp/fixture_server.py``) in
a real process, over stdio or streamable HTTP on 127.0.0.1, SIGKILLed, exiting,
hanging or answering too much, in a pool with another agent. Real time, bounded by
``DEADLINE``; the limits made small: ``tool_timeout`` 2 s, and ``start_timeout`` 3 s
for a server that never starts (others keep the default: a loaded machine may take
seconds to start a Python server).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio

from agentcore import Message, ModelRequest, ModelResponse
from agentcore.testing import ScriptedModel, tool_call_reply
from ledger import MemorySink
from subagent import EventKind, Pool, Spec, Stream, TaskError, open_pool
from subagent.mcp import McpServer, McpServerError
from tests.subagent.mcp.helpers import FIXTURE, free_port, gone, wait_for

from .cellkit import bystander_finishes, check_ledger, check_levels, register_bystander
from .matrix import cells

#: Real seconds that bound a cell; a cell that reaches it has hung.
DEADLINE = 60.0
TOOL_TIMEOUT = 2.0
START_TIMEOUT = 3.0
#: The tools the victim may name whether or not the server is up.
TOOLS = ("echo", "wait", "big", "exit")

# The SDK's streamable HTTP client leaves httpx2's and httpcore2's response iterators to
# the garbage collector when a stream ends; trio warns about each.
sse_leak = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(x|core)2\.:ResourceWarning",
    r"ignore:Exception ignored in. <async_generator object "
    ":pytest.PytestUnraisableExceptionWarning",
)


@attrs.define
class Seen:
    """What a cell saw."""

    end: str = ""
    tool_texts: list[str] = attrs.Factory(list)
    server_errors: list[str] = attrs.Factory(list)
    ledger_errors: list[str | None] = attrs.Factory(list)
    after: str = ""
    marker: str = ""


@attrs.define
class Peer:
    """The server process: started by the pool (stdio) or by the cell (HTTP)."""

    kind: str
    tmp: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def pidfile(self) -> Path:
        return self.tmp / "fx.pid"

    def pid(self) -> int:
        if self.proc is not None:
            return self.proc.pid
        return int(self.pidfile.read_text())

    def start_http(self) -> None:
        self.port = self.port or free_port()
        self.proc = subprocess.Popen(
            [sys.executable, FIXTURE, "--http", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def http_up(self) -> None:
        async def answers() -> bool:
            try:
                await (await trio.open_tcp_stream("127.0.0.1", self.port)).aclose()
            except OSError:
                return False
            return True

        with trio.fail_after(DEADLINE):
            # Another process's port: nothing in this one can wake us when it opens.
            while not await answers():  # noqa: ASYNC110
                await trio.sleep(0.05)

    def config(self, argv: list[str] | None = None, start_timeout: float = 30.0
               ) -> McpServer:
        if self.kind == "mcp_http":
            return McpServer("fx", url=f"http://127.0.0.1:{self.port}/mcp")
        script = f'echo $$ > "{self.pidfile}"; exec "$0" "$@"'
        argv = argv or [sys.executable, FIXTURE]
        return McpServer("fx", command="sh", args=("-c", script, *argv),
                         start_timeout=start_timeout)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def call(tool: str, args: dict[str, object], id: str) -> Message:
    return tool_call_reply(tool, json.dumps(args), id=id)


async def play(kind: str, fault: str, moment: str, tmp: Path) -> Seen:
    seen = Seen()
    peer = Peer(kind, tmp)
    marker = tmp / "marker"
    wait = call("wait", {"marker": str(marker)}, "w1")
    argv: list[str] | None = None
    if kind == "mcp_http":
        if moment != "starting" or fault == "hangs":
            peer.start_http()
            await peer.http_up()
        else:
            peer.port = free_port()
    if moment == "starting" and kind == "mcp_stdio":
        argv = {
            "hangs": ["sleep", "3600"],
            "closes_early": ["sh", "-c", "exit 3"],
            "killed_mid_call": ["sh", "-c", "kill -9 $$"],
            "oversized": [sys.executable, str(Path(FIXTURE).with_name("hostile_stdio.py")),
                          "values", str(5 * 1024 * 1024)],
            "comes_back": ["sh", "-c", f'test -e "{tmp}/once" || {{ touch "{tmp}/once"; '
                           f'exit 3; }}; exec "$0" "$@"', sys.executable, FIXTURE],
        }[fault]
    script: list[Message] = {
        "killed_mid_call": [wait],
        "killed_between_calls": [call("echo", {"text": "one"}, "e1")],
        "hangs": [wait],
        "oversized": [call("big", {"size": 5 * 1024 * 1024}, "b1")],
        "closes_early": [call("exit", {"code": 0}, "x1")],
        "comes_back": [wait],
    }[fault]
    if moment == "starting":
        script = [call("echo", {"text": "hello"}, "e1")]
    if moment == "idle":
        script = [*script, call("echo", {"text": "two"}, "e2")]
    timeout = START_TIMEOUT if (fault, moment) == ("hangs", "starting") else 30.0
    model = KillBefore(ScriptedModel([*script, "victim done"]), peer,
                       2 if moment == "idle" else 0)
    stream = Stream(100_000)
    sink = MemorySink()
    try:
        with trio.fail_after(DEADLINE):
            async with open_pool(events=stream, mcp=[peer.config(argv, timeout)]) as pool:
                pool.register(Spec("victim", model=model, tools=pool.mcp_tools("fx", *TOOLS),
                                   audit=sink, tool_timeout=TOOL_TIMEOUT))
                register_bystander(pool, sink)
                model.pool = pool
                await scenario(pool, peer, fault, moment, marker, seen)
                if moment != "close":
                    await bystander_finishes(pool)
                if fault == "comes_back" or (fault, moment) in (
                    ("killed_mid_call", "mid_call"), ("killed_between_calls", "idle"),
                    ("oversized", "mid_call"), ("closes_early", "mid_call"),
                ):
                    # The server is started again (after its 1 s backoff) and answers.
                    if kind == "mcp_http" and peer.proc is not None and \
                            peer.proc.poll() is not None:
                        peer.start_http()
                    await wait_for(lambda: pool.mcp is not None and pool.mcp.is_up("fx"),
                                   "up again")
                    seen.after = await answered(pool)
            if kind == "mcp_stdio" and peer.pidfile.exists():
                # Closed with the pool, and reaped.
                assert gone(peer.pid())
            if kind == "mcp_http" and fault == "hangs" and moment != "starting":
                # The pool sent the cancel and ended the session as it closed; the
                # server cancels its handler on its own time, before it is stopped.
                await wait_for(lambda: marker.read_text() == "cancelled",
                               "the server cancelled its handler")
    finally:
        peer.stop()
    seen.tool_texts = [m.content for m in model.requests[-1].messages if m.role == "tool"] \
        if model.requests else []
    stream.close()
    seen.server_errors = [e.error or "" async for e in stream
                          if e.kind is EventKind.mcp_server_error]
    seen.ledger_errors = [e.error for e in sink.entries
                          if e.agent_id == "victim" and e.kind == "tool_result"]
    if marker.exists():
        seen.marker = marker.read_text()
    if moment != "close":
        check_ledger(sink)
    return seen


async def answered(pool: Pool) -> str:
    """A call once the server answers again. An HTTP server is seen down only when a
    call fails (the ping after it, then a restart): such failures are retried."""
    echo = pool.mcp_tools("fx", "echo")[0]
    with trio.fail_after(DEADLINE):
        while True:
            try:
                return await echo.execute('{"text": "back"}')
            except McpServerError:
                await trio.sleep(0.2)


class KillBefore:
    """The victim's model: before its reply number ``turn`` (from 1), the server is
    SIGKILLed and reaped (between two calls, as the model thinks)."""

    def __init__(self, inner: ScriptedModel, peer: Peer, turn: int) -> None:
        self.inner, self.peer, self.turn = inner, peer, turn
        self.requests = inner.requests
        self.pool: Pool | None = None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if len(self.inner.requests) + 1 == self.turn:
            pid = self.peer.pid()
            os.kill(pid, signal.SIGKILL)
            if self.peer.proc is not None:
                self.peer.proc.wait()
            else:
                # Seen down by the pool (reaped, and the next call not sent to it).
                await wait_for(lambda: gone(pid), "the killed server reaped")
                pool = self.pool
                assert pool is not None
                await wait_for(lambda: pool.mcp is not None and not pool.mcp.is_up("fx"),
                               "the killed server seen down")
        return await self.inner.complete(request)


async def scenario(pool: Pool, peer: Peer, fault: str, moment: str, marker: Path,
                   seen: Seen) -> None:
    task = await pool.submit("victim", "go")
    if peer.kind == "mcp_http" and moment == "starting" and fault == "comes_back":
        await trio.sleep(0.5)
        peer.start_http()
    if moment in ("mid_call", "cancel", "close") and fault in (
            "killed_mid_call", "hangs", "comes_back"):
        await wait_for(lambda: marker.exists() and marker.read_text() == "started",
                       "the call started")
        if fault in ("killed_mid_call", "comes_back"):
            os.kill(peer.pid(), signal.SIGKILL)
            if peer.kind == "mcp_http":
                assert peer.proc is not None
                peer.proc.wait()
                if fault == "comes_back":
                    peer.start_http()
        elif moment == "cancel":
            task.cancel()
        elif moment == "close":
            await bystander_finishes(pool)
            pool.cancel()
    if moment == "idle":
        # Between the two calls: the server dies, as the model thinks.
        pass
    try:
        seen.end = (await task.wait()).output
    except TaskError as exc:
        seen.end = f"{type(exc).__name__}: {exc}"


def fixed(text: str) -> str:
    """``text`` with its port numbers written PORT."""
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)


#: (peer, fault, moment): what the cell sees. ``tool_texts``: what the victim's model
#: got back for each call (the ledger's tool_result errors say the same);
#: ``server_errors``: the pool's mcp_server_error events; ``after``: a call once the
#: server is up again; ``marker``: what the ``wait`` tool last wrote (``cancelled``: the
#: server saw the call cancelled). Ports are written PORT.
SERVER = "MCP server 'fx'"
FX = f"McpServerError: {SERVER}"
CLOSED = "closed the connection"
AGAIN = f"{CLOSED} during the call; it will be started again"
BOUND = "broke a bound: a message is larger than 4194304 bytes (MAX_MESSAGE)"
REFUSED = "ConnectError: all attempts to connect to 127.0.0.1:PORT failed"
CANCELLED = "TaskCancelled: task victim/0001 was cancelled"


def failed(tool: str, why: str) -> str:
    return f"tool '{tool}' failed: {FX} {why}"


def cell(texts: list[str], servers: list[str], after: str = "", marker: str = "",
         end: str = "victim done") -> Seen:
    ledger = [None if text in ("one",) else text for text in texts]
    return Seen(end, texts, servers, ledger, after, marker)


EXPECTED: dict[tuple[str, str, str], Seen] = {
    ("mcp_stdio", "killed_mid_call", "starting"): cell(
        [failed("echo", f"is not available: failed: {CLOSED}")], [f"{SERVER} failed: {CLOSED}"]),
    ("mcp_stdio", "killed_mid_call", "mid_call"): cell(
        [failed("wait", AGAIN)], [f"{SERVER} {CLOSED}"], "back", "started"),
    ("mcp_stdio", "killed_between_calls", "idle"): cell(
        ["one", failed("echo", f"is not available: {CLOSED}")], [f"{SERVER} {CLOSED}"], "back"),
    ("mcp_stdio", "hangs", "starting"): cell(
        [failed("echo", "is not available: did not start within 3s")],
        [f"{SERVER} did not start within 3s"]),
    ("mcp_stdio", "hangs", "mid_call"): cell(
        ["tool 'wait' timed out after 2s"], [], marker="cancelled"),
    ("mcp_stdio", "hangs", "cancel"): cell([], [], marker="cancelled", end=CANCELLED),
    ("mcp_stdio", "hangs", "close"): cell([], [], marker="cancelled", end=CANCELLED),
    ("mcp_stdio", "oversized", "starting"): cell(
        [failed("echo", f"is not available: failed: {BOUND}")], [f"{SERVER} failed: {BOUND}"]),
    ("mcp_stdio", "oversized", "mid_call"): cell(
        [failed("big", AGAIN)], [f"{SERVER} {BOUND}"], "back"),
    ("mcp_stdio", "closes_early", "starting"): cell(
        [failed("echo", f"is not available: failed: {CLOSED}")], [f"{SERVER} failed: {CLOSED}"]),
    ("mcp_stdio", "closes_early", "mid_call"): cell(
        [failed("exit", AGAIN)], [f"{SERVER} {CLOSED}"], "back"),
    # Started again after its 1 s backoff: the second start succeeds.
    ("mcp_stdio", "comes_back", "starting"): cell(
        [failed("echo", f"is not available: failed: {CLOSED}")], [f"{SERVER} failed: {CLOSED}"],
        "back"),
    ("mcp_stdio", "comes_back", "mid_call"): cell(
        [failed("wait", AGAIN)], [f"{SERVER} {CLOSED}"], "back", "started"),
    ("mcp_http", "killed_between_calls", "idle"): cell(
        ["one", failed("echo", "failed the call: Connection closed; it is being pinged")],
        [f"{SERVER} failed: {REFUSED}"], "back"),
    ("mcp_http", "hangs", "mid_call"): cell(
        ["tool 'wait' timed out after 2s"], [], marker="cancelled"),
    ("mcp_http", "hangs", "cancel"): cell([], [], marker="cancelled", end=CANCELLED),
    ("mcp_http", "hangs", "close"): cell([], [], marker="cancelled", end=CANCELLED),
    # One event at most: the SDK fails the call, and the ping after it is answered.
    ("mcp_http", "oversized", "mid_call"): cell(
        [failed("big", "failed the call: SSE stream failed: Server-sent event exceeded the "
                "1048576 byte limit.; it is being pinged")], [], "back"),
    ("mcp_http", "closes_early", "starting"): cell(
        [failed("echo", f"is not available: failed: {REFUSED}")], [f"{SERVER} failed: {REFUSED}"]),
    # Killed during a call: that call fails, the ping fails, it is started again (a
    # new process on the same port, for comes_back; the cell's own restart otherwise).
    ("mcp_http", "killed_mid_call", "mid_call"): cell(
        [failed("wait", "failed the call: SSE stream ended without a response; it is being "
                "pinged")], [f"{SERVER} failed: {REFUSED}"], "back", "started"),
    ("mcp_http", "comes_back", "mid_call"): cell(
        [failed("wait", "failed the call: SSE stream ended without a response; it is being "
                "pinged")], [f"{SERVER} failed: {REFUSED}"], "back", "started"),
    # Reported at each failed start until it answers (how many: the server's start time).
    ("mcp_http", "comes_back", "starting"): cell(
        [failed("echo", f"is not available: failed: {REFUSED}")], [f"{SERVER} failed: {REFUSED}"],
        "back"),
}


def params() -> list[object]:
    return [pytest.param(*cell) for cell in cells("mcp_stdio", "mcp_http")]


@pytest.mark.slow
@sse_leak
@pytest.mark.parametrize(("peer", "fault", "moment"), params())
def test_mcp_server_cell(peer: str, fault: str, moment: str, tmp_path: Path) -> None:
    seen: list[Seen] = []

    def run() -> None:
        seen.append(trio.run(play, peer, fault, moment, tmp_path))

    check_levels(run, peer)
    got = seen[0]
    got.tool_texts = [fixed(text) for text in got.tool_texts]
    got.server_errors = [fixed(text) for text in got.server_errors]
    got.ledger_errors = [None if text is None else fixed(text) for text in got.ledger_errors]
    # The ledger's tool_result entries say what the model was told (None: no error).
    assert got.ledger_errors == [None if text == "one" else text for text in got.tool_texts]
    if peer == "mcp_http":
        # Reported at each failed restart: how many, the server's start time tells.
        got.server_errors = sorted(set(got.server_errors))
    assert got == EXPECTED[peer, fault, moment]
