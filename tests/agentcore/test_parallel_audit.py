"""A failing audit sink inside a batch of concurrent read-only calls (SPEC 2.2, 4): the
run ends ``error`` with an AuditError naming the entry that failed, not with the
nursery's ExceptionGroup; the group is chained to it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

from agentcore import Agent, AuditError, EndReason, Message, ToolCall
from agentcore.testing import ScriptedModel
from tests._failing_sink import DISK_FULL, FailingSink

Clock = trio.testing.MockClock


class Reader:
    """A read-only tool that answers after one virtual second."""

    name = "read"
    description = "reads"
    parameters: Mapping[str, Any] = {"type": "object"}
    read_only = True

    async def execute(self, arguments: str) -> str:
        await trio.sleep(1)
        return "read"


class Meeting(Reader):
    """A read-only tool whose calls answer together once ``n`` of them have started
    (woken by an event, so none of them is at a checkpoint when the others fail)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.arrived = 0
        self.all_in = trio.Event()

    async def execute(self, arguments: str) -> str:
        self.arrived += 1
        if self.arrived < self.n:
            await self.all_in.wait()
        self.all_in.set()
        return "read"


def batch(n: int) -> Message:
    calls = tuple(ToolCall(f"c{i}", "read", json.dumps({"i": i})) for i in range(n))
    return Message("assistant", tool_calls=calls)


@pytest.mark.parametrize(("kind", "at"), [("tool_request", 0.0), ("tool_result", 1.0)])
async def test_one_failing_entry_in_a_parallel_batch_names_the_entry_not_an_exception_group(
    autojump_clock: Clock, kind: str, at: float
) -> None:
    agent = Agent(model=ScriptedModel([batch(3), "never"]), tools=[Reader()],
                  audit=FailingSink(kind, ("c1",)))
    result = await agent.run("go")
    assert trio.current_time() == at
    text = f"the audit sink failed to record {kind!r}: {DISK_FULL}"
    assert result.summary.end_reason is EndReason.error
    assert result.summary.error == f"AuditError: {text}"
    assert isinstance(result.exception, AuditError)
    assert str(result.exception) == text
    group = result.exception.__cause__
    expected = pytest.RaisesExc(AuditError, match=f"^{re.escape(text)}$")
    assert pytest.RaisesGroup(expected).matches(group)
    assert isinstance(group.exceptions[0].__cause__, OSError)


async def test_several_failing_entries_in_a_parallel_batch_name_the_first_and_the_count(
    autojump_clock: Clock,
) -> None:
    # The three calls end together and none can record its tool_result.
    agent = Agent(model=ScriptedModel([batch(3), "never"]), tools=[Meeting(3)],
                  audit=FailingSink("tool_result"))
    result = await agent.run("go")
    text = f"the audit sink failed to record 'tool_result': {DISK_FULL}"
    assert result.summary.error == (
        f"AuditError: {text} (the first of 3 entries of one batch of parallel tool calls "
        "that could not be recorded)"
    )
    assert isinstance(result.exception, AuditError)
    assert pytest.RaisesGroup(AuditError, AuditError, AuditError).matches(
        result.exception.__cause__
    )
