"""open_pool(loop_watchdog=...): an async tool that blocks the event loop is reported,
with the tool and the stack, as one event and one log warning (issue 15, item 5).

These run on trio's real clock: the watchdog measures wall time, and what it detects
is a thread that does not return to trio. The blocking tool sleeps 0.6 s against a
0.25 s threshold; the quiet test uses a 1 s threshold, far above anything a loaded
machine does to a loop that is not blocked.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import ClassVar

import pytest
import trio

from agentcore import Liveness
from subagent import Event, EventKind, LoopStall, Spec, Stream, open_pool
from subagent.testing import ScriptedModel, check_events, tool_call_reply

from .helpers import CountingModel


class BlockingTool:
    """An async tool that blocks the trio thread (the bug the watchdog finds)."""

    name = "blocker"
    description = "Blocks the event loop."
    parameters: ClassVar[dict[str, object]] = {"type": "object", "properties": {}}
    read_only = True
    liveness = Liveness.opaque

    async def execute(self, arguments: str) -> str:
        return block_the_loop_for(0.6)


def block_the_loop_for(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def _watchdog_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "subagent loop watchdog"]


async def test_a_tool_blocking_the_loop_is_reported_once_with_its_stack(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events = Stream(1000)
    model = ScriptedModel([tool_call_reply("blocker", "{}", id="b1"), "done"])
    with caplog.at_level(logging.WARNING, logger="subagent"):
        async with open_pool(events=events, loop_watchdog=0.25) as pool:
            assert len(_watchdog_threads()) == 1
            pool.register(Spec("w", model=model, tools=[BlockingTool()]))
            task = await pool.submit("w", "go")
            assert (await task.wait()).output == "done"
    events.close()
    assert _watchdog_threads() == []
    log: list[Event] = [event async for event in events]
    assert check_events(log, max_concurrent=8).runs == 1
    blocked = [e for e in log if e.kind is EventKind.event_loop_blocked]
    in_tool = [e for e in blocked if e.stall is not None and e.stall.tool == "blocker"]
    assert len(in_tool) == 1, blocked
    (event,) = in_tool
    stall = event.stall
    assert isinstance(stall, LoopStall)
    assert (event.path, event.call_id) == (task.path, "b1")
    assert (stall.path, stall.call_id) == (task.path, "b1")
    assert stall.duration >= 0.25
    assert "block_the_loop_for" in stall.stack
    assert "time.sleep(seconds)" in stall.stack
    assert event.error == f"the event loop was blocked for {stall.duration:.2f}s"
    warnings = [r for r in caplog.records if "tool 'blocker'" in r.getMessage()]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert text.startswith("the trio event loop has not reached a checkpoint for ")
    assert f"(loop_watchdog=0.25), running tool 'blocker' of {task.path[0]}" in text
    assert "block_the_loop_for" in text


async def test_a_loop_that_reaches_checkpoints_is_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events = Stream(1000)
    with caplog.at_level(logging.WARNING, logger="subagent"):
        async with open_pool(events=events, loop_watchdog=1.0) as pool:
            pool.register(Spec("w", model=CountingModel(delay=0.05)))
            tasks = [await pool.submit("w", f"t{i}") for i in range(20)]
            for task in tasks:
                await task.wait()
            # Long enough for several heartbeats to be asked for and served.
            await trio.sleep(0.6)
    events.close()
    log = [event async for event in events]
    assert [e for e in log if e.kind is EventKind.event_loop_blocked] == []
    assert [r for r in caplog.records if r.name == "subagent"] == []
    assert _watchdog_threads() == []


async def test_the_watchdog_is_off_by_default() -> None:
    async with open_pool():
        assert _watchdog_threads() == []


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf")])
async def test_a_bad_loop_watchdog_is_refused(value: float) -> None:
    with pytest.raises(ValueError) as info:
        async with open_pool(loop_watchdog=value):
            pass
    assert str(info.value) == (
        f"open_pool loop_watchdog must be a positive number of seconds, not {value!r}"
    )


async def test_the_watchdog_thread_ends_with_a_block_that_raises() -> None:
    with pytest.raises(KeyError):
        async with open_pool(loop_watchdog=0.25):
            assert len(_watchdog_threads()) == 1
            raise KeyError("out")
    assert _watchdog_threads() == []
