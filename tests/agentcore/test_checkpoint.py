"""Checkpoints of a running run (issue 20 item 3, agentcore side): when the
checkpointer is called, what the snapshots hold, and resuming a crashed run from
one with ``recover_calls`` (a finished call never runs again; a call in flight runs
again only if its tool is idempotent or read-only)."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from agentcore import (
    Agent,
    CallStatus,
    Checkpoint,
    CheckpointKind,
    FunctionTool,
    PendingCall,
    RunState,
    ToolCall,
    is_idempotent,
    tool,
)
from agentcore.lowlevel import INTERRUPTED, recover_calls
from ledger import MemorySink
from tests.agentcore._durable import model

Clock = trio.testing.MockClock
WORK = [[["c1", "write", 1], ["c2", "look", 1]], [["c3", "write", 0]]]


def tools(ran: list[str], idempotent: bool = False) -> list[FunctionTool]:
    def make(name: str, read_only: bool) -> FunctionTool:
        async def run(arguments: str) -> str:
            await trio.sleep(json.loads(arguments)["s"])
            ran.append(f"{name} {arguments}")
            return f"{name} done"

        return FunctionTool(name, name, {"type": "object"}, run, read_only=read_only,
                            idempotent=idempotent and not read_only)

    return [make("look", True), make("write", False)]


def agent(ran: list[str], taken: list[Checkpoint] | None = None, *, audit: Any = None,
          idempotent: bool = False) -> Agent:
    async def keep(point: Checkpoint) -> None:
        await trio.lowlevel.checkpoint()
        assert taken is not None
        taken.append(point)

    return Agent(model=model(WORK), tools=tools(ran, idempotent), agent_id="worker",
                 audit=audit, checkpoint=None if taken is None else keep)


def shape(point: Checkpoint) -> list[Any]:
    s = point.state
    return [str(point.kind), s.turn, list(point.in_flight),
            [(p.call.id, str(p.status)) for p in s.pending], len(s.messages)]


async def test_the_checkpointer_sees_every_turn_boundary_and_every_mutating_call(
    autojump_clock: Clock,
) -> None:
    ran: list[str] = []
    taken: list[Checkpoint] = []
    result = await agent(ran, taken).run("go")
    assert result.output == "done after 2 turns"
    assert [shape(p) for p in taken] == [
        ["turn", 0, [], [], 1],
        ["call", 1, ["c1"], [("c1", "waiting"), ("c2", "waiting")], 2],
        ["turn", 1, [], [], 4],
        ["call", 2, ["c3"], [("c3", "waiting")], 5],
        ["turn", 2, [], [], 6],
        ["ended", 3, [], [], 7],
    ]
    # Snapshots are copies in the form of a paused run: storable, and not changed since.
    middle = taken[1].state
    assert middle.paused and middle.summary is not None
    assert middle.summary.end_reason == "paused"
    again = RunState.from_json(middle.to_json())
    assert [m.content for m in again.messages] == [m.content for m in middle.messages]


async def test_no_checkpointer_no_snapshot(autojump_clock: Clock) -> None:
    ran: list[str] = []
    result = await agent(ran).run("go")
    assert result.output == "done after 2 turns"
    assert ran == ['write {"s": 1}', 'look {"s": 1}', 'write {"s": 0}']


async def _crashed_at_c1(idempotent: bool) -> tuple[list[str], Any, MemorySink]:
    # The run "crashed" while c1 was in flight: resume it from that checkpoint.
    taken: list[Checkpoint] = []
    await agent([], taken).run("go")
    stored = RunState.from_json(taken[1].state.to_json())
    repeatable = {"look", "write"} if idempotent else {"look"}
    recover_calls(stored, {"c1"}, repeatable, {}, "worker@2")
    ran: list[str] = []
    sink = MemorySink()
    result = await agent(ran, audit=sink, idempotent=idempotent).resume(stored)
    return ran, result, sink


async def test_a_call_in_flight_at_a_crash_is_not_repeated(autojump_clock: Clock) -> None:
    ran, result, sink = await _crashed_at_c1(idempotent=False)
    assert ran == ['look {"s": 1}', 'write {"s": 0}']
    tool_results = [(m.tool_call_id, m.content, m.is_error)
                    for m in result.messages if m.role == "tool"]
    assert tool_results == [("c1", INTERRUPTED, True), ("c2", "look done", False),
                            ("c3", "write done", False)]
    assert INTERRUPTED == "interrupted by a crash; not repeated"
    [resumed] = [e for e in sink.entries if e.kind == "run_resumed"]
    assert resumed.data == {"answers": 0, "pending": 2, "checkpoint": "worker@2",
                            "interrupted": "c1"}
    assert result.summary.end_reason == "stop"


async def test_an_idempotent_call_in_flight_runs_again(autojump_clock: Clock) -> None:
    ran, result, sink = await _crashed_at_c1(idempotent=True)
    assert ran == ['write {"s": 1}', 'look {"s": 1}', 'write {"s": 0}']
    assert result.messages[2].content == "write done"
    [resumed] = [e for e in sink.entries if e.kind == "run_resumed"]
    assert resumed.data == {"answers": 0, "pending": 2, "checkpoint": "worker@2",
                            "interrupted": ""}


def test_recover_calls_marks_only_the_calls_in_flight() -> None:
    state = RunState.begin([])
    state.pending = [PendingCall(ToolCall("a", "write", "{}"), CallStatus.waiting),
                     PendingCall(ToolCall("b", "sub", "{}"), CallStatus.waiting),
                     PendingCall(ToolCall("c", "write", "{}"), CallStatus.waiting)]
    child = RunState.begin([])
    recover_calls(state, {"a", "b"}, set(), {"b": child}, "x@1")
    assert [(p.call.id, str(p.status), p.result) for p in state.pending] == [
        ("a", "done", INTERRUPTED), ("b", "delegated", ""), ("c", "waiting", "")]
    assert state.children == [child]
    assert state.checkpoint == "x@1"


def test_idempotent_is_declared_like_read_only() -> None:
    @tool(idempotent=True)
    async def put(key: str) -> str:
        """Set a key."""
        return key

    @tool(read_only=True)
    async def get(key: str) -> str:
        """Get a key."""
        return key

    @tool
    async def append(key: str) -> str:
        """Append to a key."""
        return key

    assert (put.idempotent, get.idempotent, append.idempotent) == (True, False, False)
    assert [is_idempotent(t) for t in (put, get, append)] == [True, True, False]
    assert CheckpointKind.call == "call"
