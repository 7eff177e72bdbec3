"""A cluster-wide admission workflow bounds the root trees running at once."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError

from agentcore import FunctionTool, Message, ModelRequest, ModelResponse, ToolCall, Usage
from agentcore.testing import ScriptedModel, ScriptItem
from subagent import Defaults, Spec, SpecFile
from subagent.temporal import (
    AdmissionState,
    DevServer,
    RootResult,
    RunOptions,
    Worker,
    admission_state,
    approve,
    start,
)

from .pausing import defer_writes, writer_tree
from .test_approvals import wait_paused

#: Seconds a test waits for the cluster to reach a state before it fails.
DEADLINE = 30.0


class Work:
    """A tool that counts the calls running at once and waits for ``gate``."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0

    async def __call__(self, arguments: str) -> str:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            opened = await trio.to_thread.run_sync(self.gate.wait, DEADLINE)
        finally:
            with self.lock:
                self.running -= 1
        return "done" if opened else "gate not opened"


def slow_specs(work: Work) -> SpecFile:
    """``slow`` calls ``work`` once, then answers with its task and the tool's result."""
    def slow(request: ModelRequest) -> ScriptItem:
        results = [m for m in request.messages if m.role == "tool"]
        if not results:
            call = ToolCall("w1", "work", json.dumps({}))
            return ModelResponse(Message("assistant", "", tool_calls=(call,)), "tool_calls",
                                 Usage(10, 2))
        task = next(m.content for m in request.messages if m.role == "user")
        return ModelResponse(Message("assistant", f"{task}: {results[-1].content}"), "stop",
                             Usage(10, 2))

    tool = FunctionTool("work", "Work.", {"type": "object"}, work, read_only=True)
    return SpecFile("slow", (Spec("slow", model=ScriptedModel(slow), tools=(tool,)),), {}, {},
                    Defaults())


async def until(client: Client, name: str, check: Callable[[AdmissionState], bool]) -> None:
    """Query the admission workflow (a real server: no virtual clock) until ``check``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while True:
        state = await admission_state(client, name)
        if check(state):
            return
        if loop.time() > end:
            raise AssertionError(f"not reached within {DEADLINE} s: {state}")
        await asyncio.sleep(0.05)


async def bounded(server: DevServer, work: Work) -> list[RootResult]:
    client, other = [await Client.connect(server.address) for _ in range(2)]
    options = RunOptions(admission="two", admission_limit=2)
    async with (
        Worker(client, "admit", specs=slow_specs(work), max_concurrent_roots=8),
        Worker(other, "admit", specs=slow_specs(work), max_concurrent_roots=8),
    ):
        first = [await start(client, "slow", f"r{i}", task_queue="admit", id=f"admit-{i}",
                             options=options) for i in range(2)]
        await until(client, "two", lambda s: len(s.holders) == 2)
        more = [await start(client, "slow", f"r{i}", task_queue="admit", id=f"admit-{i}",
                            options=options) for i in range(2, 5)]
        doomed = await start(client, "slow", "x", task_queue="admit", id="admit-x",
                             options=options)
        await until(client, "two", lambda s: len(s.waiting) == 4)
        state = await admission_state(client, "two")
        assert (state.limit, sorted(state.holders)) == (2, ["admit-0", "admit-1"])
        assert sorted(state.waiting) == ["admit-2", "admit-3", "admit-4", "admit-x"]
        await doomed.cancel()
        with pytest.raises(WorkflowFailureError) as caught:
            await doomed.result()
        assert isinstance(caught.value.cause, CancelledError)
        await until(client, "two", lambda s: "admit-x" not in s.waiting)
        assert sorted((await admission_state(client, "two")).waiting) == [
            "admit-2", "admit-3", "admit-4"]
        assert work.running == 2
        work.gate.set()
        results = [await h.result() for h in first + more]
        await until(client, "two", lambda s: s.holders == [] and s.waiting == [])
        return results


@pytest.mark.slow
def test_admission_bounds_the_roots_running_across_workers(dev_server: DevServer) -> None:
    work = Work()
    results = asyncio.run(bounded(dev_server, work))
    assert [r.output for r in results] == [f"r{i}: done" for i in range(5)]
    assert {r.status for r in results} == {"finished"}
    assert (work.most, work.running) == (2, 0)


async def refused(server: DevServer, work: Work) -> RootResult:
    client = await Client.connect(server.address)
    options = RunOptions(admission="one", admission_limit=1, admission_max_queue=1)
    async with Worker(client, "refuse", specs=slow_specs(work)):
        held = await start(client, "slow", "a", task_queue="refuse", id="refuse-a",
                           options=options)
        await until(client, "one", lambda s: s.holders == ["refuse-a"])
        queued = await start(client, "slow", "b", task_queue="refuse", id="refuse-b",
                             options=options)
        await until(client, "one", lambda s: s.waiting == ["refuse-b"])
        extra = await start(client, "slow", "c", task_queue="refuse", id="refuse-c",
                            options=options)
        result = await extra.result()
        work.gate.set()
        assert (await held.result()).output == "a: done"
        assert (await queued.result()).output == "b: done"
        return result


@pytest.mark.slow
def test_a_full_admission_queue_refuses_a_root(dev_server: DevServer) -> None:
    work = Work()
    result = asyncio.run(refused(dev_server, work))
    assert result == RootResult(
        "failed", error="not admitted by 'one': the admission queue is full (1 waiting)")
    assert work.most == 1


def test_admission_limits_are_checked(dev_server: DevServer) -> None:
    async def check() -> None:
        client = await Client.connect(dev_server.address)
        with pytest.raises(ValueError, match=r"^admission_limit must be at least 1, not 0$"):
            await start(client, "slow", "a", task_queue="nowhere",
                        options=RunOptions(admission="zero", admission_limit=0))

    asyncio.run(check())


async def paused_gives_back(server: DevServer, folder: Path, work: Work) -> list[RootResult]:
    client = await Client.connect(server.address)
    writer, slow = writer_tree(folder / "writes.log"), slow_specs(work)
    specs = SpecFile("mix", writer.specs + slow.specs, {"boss": ("subagent",)}, {}, Defaults())
    options = RunOptions(admission="paused", admission_limit=1)
    async with Worker(client, "paused", specs=specs, gate=defer_writes):
        boss = await start(client, "boss", "save", task_queue="paused", id="paused-boss",
                           options=options)
        await wait_paused(client, "paused-boss")
        # Paused: the slot is free while it waits for the human.
        await until(client, "paused", lambda s: s.holders == [] and s.waiting == [])
        busy = await start(client, "slow", "s", task_queue="paused", id="paused-slow",
                           options=options)
        await until(client, "paused", lambda s: s.holders == ["paused-slow"])
        await approve(client, "paused-boss", "w1")
        # Answered: it queues again for a slot to resume.
        await until(client, "paused", lambda s: s.waiting == ["paused-boss"])
        work.gate.set()
        results = [await busy.result(), await boss.result()]
        await until(client, "paused", lambda s: s.holders == [] and s.waiting == [])
        return results


@pytest.mark.slow
def test_a_paused_root_gives_its_slot_back_and_queues_to_resume(
    dev_server: DevServer, tmp_path: Path
) -> None:
    work = Work()
    results = asyncio.run(paused_gives_back(dev_server, tmp_path, work))
    assert [r.output for r in results] == ["s: done", "boss: scribe: written"]
    assert (tmp_path / "writes.log").read_text() == '{"text": "hello"}\n'
