"""A run that lent its concurrency slot takes it back however the lending call ends
(SPEC 3.2, 3.5: the bound applies to runs not waiting on a child). Regression tests
of a found bug: a cancelled delegation resumed its run without a slot."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

from agentcore import Liveness, Message, ModelRequest, ToolCall
from agentcore.testing import Delayed, ScriptedModel
from subagent import (
    Pool,
    Spec,
    Stream,
    SubagentTool,
    TaskCancelled,
    TaskTimeout,
    open_pool,
)
from subagent.testing import check_events

from .helpers import drain

Clock = trio.testing.MockClock


class Opaque:
    """The delegation tool declared opaque: the calling run bounds it with its
    ``tool_timeout`` (120 s by default), which cancels the call."""

    name = "subagent"
    read_only = False
    liveness = Liveness.opaque

    def __init__(self, pool: Pool) -> None:
        self.inner = SubagentTool(pool)
        self.description = self.inner.description

    @property
    def parameters(self) -> Mapping[str, Any]:
        return self.inner.parameters

    async def execute(self, arguments: str) -> str:
        return await self.inner.execute(arguments)


def delegate(agent: str, task: str, *, wait: bool = True, id: str = "d") -> Message:
    arguments = json.dumps({"agent": agent, "task": task, "wait": wait})
    return Message("assistant", tool_calls=(ToolCall(id, "subagent", arguments),))


def sleeper(request: ModelRequest) -> Delayed:
    # Answers after as many virtual seconds as its task text says.
    return Delayed(float(request.messages[-1].content), "slept")


async def test_a_run_whose_delegation_times_out_waits_for_a_slot_before_going_on(
    autojump_clock: Clock,
) -> None:
    # One slot. The parent lends it to delegate; a queued root takes it and holds it
    # until 250. The parent's tool_timeout cancels the call at 120: it must not make
    # its next model call before the root ends.
    stream = Stream(10_000)
    seen: list[tuple[float, int]] = []
    pool_ref: list[Pool] = []

    def parent(request: ModelRequest) -> Message | str:
        if len(request.messages) == 2:
            return delegate("sleeper", "1000")
        seen.append((trio.current_time(), pool_ref[0].statistics().holding_slots))
        return "gave up"

    async with open_pool(max_concurrent=1, events=stream) as pool:
        pool_ref.append(pool)
        pool.register(Spec("sleeper", model=ScriptedModel(sleeper)))
        pool.register(Spec("p", model=ScriptedModel(parent), tools=[Opaque(pool)]))
        p = await pool.submit("p", "go")
        await pool.submit("sleeper", "250")
        assert (await p.wait()).output == "gave up"
    stream.close()
    assert seen == [(250.0, 1)]
    check_events(await drain(stream), max_concurrent=1)


async def test_a_run_whose_fan_out_wait_times_out_waits_for_a_slot_before_going_on(
    autojump_clock: Clock,
) -> None:
    # One slot, one child allowed. The parent's first background child runs until
    # 100; the second delegation lends the slot to wait for a fan-out slot and gives
    # up at children_timeout (10): the parent goes on only when the child's end (100)
    # frees the slot.
    stream = Stream(10_000)
    seen: list[tuple[float, int]] = []
    pool_ref: list[Pool] = []
    script = iter([delegate("sleeper", "100", wait=False, id="a"),
                   delegate("sleeper", "1", wait=False, id="b")])

    def parent(request: ModelRequest) -> Message | str:
        reply = next(script, None)
        if reply is not None:
            return reply
        seen.append((trio.current_time(), pool_ref[0].statistics().holding_slots))
        return "ok"

    async with open_pool(max_concurrent=1, max_children=1, children_timeout=10,
                         events=stream) as pool:
        pool_ref.append(pool)
        pool.register(Spec("sleeper", model=ScriptedModel(sleeper)))
        pool.register(Spec("p", model=ScriptedModel(parent), tools=[SubagentTool(pool)]))
        await (await pool.submit("p", "go")).wait()
    stream.close()
    assert seen[0] == (100.0, 1)
    check_events(await drain(stream), max_concurrent=1)


@pytest.mark.parametrize(
    ("how", "ended_at", "error"),
    [("cancel", 130.0, TaskCancelled), ("timeout", 200.0, TaskTimeout),
     ("idle", 150.0, TaskTimeout)],
)
async def test_a_run_ended_while_it_waits_to_take_its_slot_back_ends_at_once(
    autojump_clock: Clock, how: str, ended_at: float, error: type[Exception]
) -> None:
    # As in the first test, the parent waits (shielded) from 120 for the slot a root
    # holds until 1000. A task cancel (at 130), its timeout (200) or its idle_timeout
    # (150 after its last event, at 0) ends it then, without the slot.
    limits: dict[str, Any] = {"timeout": 200.0} if how == "timeout" else {}
    if how == "idle":
        limits["idle_timeout"] = 150.0
    parent = ScriptedModel([delegate("sleeper", "1000"), "unreachable"])
    async with open_pool(max_concurrent=1) as pool:
        pool.register(Spec("sleeper", model=ScriptedModel(sleeper)))
        pool.register(Spec("p", model=parent, tools=[Opaque(pool)], **limits))
        p = await pool.submit("p", "go")
        root = await pool.submit("sleeper", "1000")
        if how == "cancel":
            await trio.sleep(130)
            p.cancel()
        with pytest.raises(error):
            await p.wait()
        assert trio.current_time() == ended_at
        assert len(parent.requests) == 1
        stats = pool.statistics()
        assert (stats.running, stats.holding_slots) == (1, 1)
        assert not root.done
        root.cancel()
