"""Random interleavings against the real dev server: roots started, cancelled while
waiting or running, terminated, finished, with the admission workflow continuing as
new every four acquires and reclaiming closed roots. At the end nothing is held,
nobody waits, and every root ended as its schedule says."""

from __future__ import annotations

import asyncio
import json
import random
import threading

import pytest
import trio
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError, TerminatedError

from agentcore import FunctionTool, Message, ModelRequest, ModelResponse, ToolCall, Usage
from agentcore.testing import ScriptedModel, ScriptItem
from subagent import Defaults, Spec, SpecFile
from subagent.temporal import (
    DevServer,
    RootResult,
    RunOptions,
    Worker,
    admission_state,
    ensure_admission,
    start,
)

from .test_admission import DEADLINE, until

ROOTS = 8
LIMIT = 2


class Gates:
    """A tool that waits until its root's gate opens, and counts the roots inside."""

    def __init__(self) -> None:
        self.gates = {f"g{i}": threading.Event() for i in range(ROOTS)}
        self.lock = threading.Lock()
        self.inside: set[str] = set()

    async def __call__(self, arguments: str) -> str:
        name = json.loads(arguments)["root"]
        with self.lock:
            self.inside.add(name)
        opened = await trio.to_thread.run_sync(self.gates[name].wait, DEADLINE,
                                               abandon_on_cancel=True)
        return "done" if opened else "gate not opened"


def gated_specs(gates: Gates) -> SpecFile:
    def gated(request: ModelRequest) -> ScriptItem:
        task = next(m.content for m in request.messages if m.role == "user")
        if not [m for m in request.messages if m.role == "tool"]:
            call = ToolCall("w1", "work", json.dumps({"root": task}))
            return ModelResponse(Message("assistant", "", tool_calls=(call,)), "tool_calls",
                                 Usage(1, 1))
        return ModelResponse(Message("assistant", f"{task}: done"), "stop", Usage(1, 1))

    tool = FunctionTool("work", "Work.", {"type": "object"}, gates, read_only=True)
    return SpecFile("gated", (Spec("gated", model=ScriptedModel(gated), tools=(tool,)),), {},
                    {}, Defaults())


async def outcome(handle: WorkflowHandle[object, RootResult]) -> str:
    try:
        result = await asyncio.wait_for(handle.result(), DEADLINE)
    except WorkflowFailureError as exc:
        return type(exc.cause).__name__
    return result.output or ""


async def schedule(server: DevServer, seed: int) -> tuple[dict[str, str], dict[str, str]]:
    rng = random.Random(seed)
    name = f"random{seed}"
    client = await Client.connect(server.address)
    gates = Gates()
    await ensure_admission(client, name, task_queue=name, limit=LIMIT, roots_per_run=4,
                           reclaim_every=0.2)
    handles: dict[str, WorkflowHandle[object, RootResult]] = {}
    expected: dict[str, str] = {}
    steps = [(op, f"g{i}") for i in range(ROOTS)
             for op in ("start", rng.choice(["cancel", "terminate", "finish", "finish"]))]
    order: list[tuple[str, str]] = []
    while steps:  # a random interleaving that keeps each root's start first
        ready = [s for s in steps if s[0] == "start" or ("start", s[1]) not in steps]
        step = rng.choice(ready)
        steps.remove(step)
        order.append(step)
    async with Worker(client, name, specs=gated_specs(gates)):
        for op, root in order:
            if op == "start":
                handles[root] = await start(client, "gated", root, task_queue=name,
                                            id=f"{name}-{root}",
                                            options=RunOptions(admission=name))
            elif op == "cancel":
                await handles[root].cancel()
                # A cancel reaches a running tree at its next heartbeat; a root whose
                # gate opens first (at the end) finishes all the same.
                expected[root] = f"{CancelledError.__name__} or {root}: done"
            elif op == "terminate":
                await handles[root].terminate("random")
                expected[root] = TerminatedError.__name__
            else:
                gates.gates[root].set()
                expected[root] = f"{root}: done"
            state = await admission_state(client, name)
            assert len(state.holders) <= LIMIT
        for gate in gates.gates.values():
            gate.set()
        got = {root: await outcome(handle) for root, handle in handles.items()}
        await until(client, name, lambda s: s.holders == [] and s.waiting == [])
    return got, expected


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_random_interleavings_leak_nothing(dev_server: DevServer, seed: int) -> None:
    got, expected = asyncio.run(schedule(dev_server, seed))
    assert sorted(got) == sorted(expected)
    for root, ended in got.items():
        assert ended in expected[root].split(" or "), (root, ended, expected[root])
