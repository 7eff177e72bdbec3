"""The failing-audit-sink policy in a pool: fail closed. An action whose entry cannot be
recorded does not happen; the task raises TaskFailed with the AuditError chained;
nothing hangs and nothing else escapes ``open_pool``."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import ledger
from agentcore import AuditError
from agentcore.testing import RecordingTool, ScriptedModel, tool_call_reply
from subagent import Event, Spec, Stream, TaskFailed, TaskStatus, open_pool
from subagent._pool._lifecycle import END_TIMEOUT
from subagent.testing import check_events
from tests._failing_sink import DISK_FULL, FailingSink, FieldsFailingSink

# Each test runs with a sink that is awaited, and with one that takes entries as their
# fields without waiting (MemorySink's way): the same failures, the same outcomes.
pytestmark = pytest.mark.parametrize("flavour", [FailingSink, FieldsFailingSink])


async def run_failing(
    kind: str, flavour: type[FailingSink]
) -> tuple[TaskFailed, RecordingTool, FailingSink, list[Event]]:
    tool = RecordingTool("echo")
    sink = flavour(kind)
    events = Stream(1000)
    async with open_pool(events=events) as pool:
        model = ScriptedModel([tool_call_reply("echo", id="c1"), "done"])
        pool.register(Spec("a", model=model, tools=[tool], audit=sink))
        task = await pool.submit("a", "go")
        with pytest.raises(TaskFailed) as info:
            await task.wait()
        assert task.status is TaskStatus.failed
    events.close()
    stats = pool.statistics()
    assert (stats.accepted, stats.running, stats.failed) == (1, 0, 1)
    if isinstance(sink, FieldsFailingSink):  # every entry taken as fields, none awaited
        assert sink.taken == len(sink.kinds) > 0
    return info.value, tool, sink, [e async for e in events]


def check_failure(error: TaskFailed, kind: str) -> None:
    text = f"the audit sink failed to record {kind!r}: {DISK_FULL}"
    assert str(error) == f"task a/0001 failed: AuditError: {text}"
    assert isinstance(error.__cause__, AuditError)
    assert str(error.__cause__) == text
    assert isinstance(error.__cause__.__cause__, OSError)


async def test_task_queued_audit_failure_fails_the_task_instead_of_crashing_the_pool(
    flavour: type[FailingSink],
) -> None:
    error, tool, sink, events = await run_failing("task_queued", flavour)
    check_failure(error, "task_queued")
    assert tool.calls == []
    assert sink.kinds == ["task_finished"]
    assert [str(e.kind) for e in events] == ["task_finished"]
    assert events[0].error == str(error).removeprefix("task a/0001 failed: ")


async def test_task_started_audit_failure_fails_the_task_instead_of_crashing_the_pool(
    flavour: type[FailingSink],
) -> None:
    error, tool, sink, events = await run_failing("task_started", flavour)
    check_failure(error, "task_started")
    assert tool.calls == []
    assert sink.kinds == ["task_queued", "task_finished"]
    assert [str(e.kind) for e in events] == ["task_queued", "task_finished"]


async def test_run_end_audit_failure_fails_the_task_instead_of_cancelling_it(
    flavour: type[FailingSink],
) -> None:
    error, tool, sink, events = await run_failing("run_end", flavour)
    check_failure(error, "run_end")
    assert tool.calls == ["{}"]
    assert sink.kinds[-1] == "task_finished"
    assert [str(e.kind) for e in events][-3:] == ["error", "agent_end", "task_finished"]


@pytest.mark.parametrize(
    ("kind", "tool_ran"),
    [("prompt", False), ("model_response", False), ("tool_request", False),
     ("gate_decision", False), ("tool_result", True)],
)
async def test_a_run_entry_that_cannot_be_recorded_fails_the_task(
    kind: str, tool_ran: bool, flavour: type[FailingSink]
) -> None:
    error, tool, _, events = await run_failing(kind, flavour)
    check_failure(error, kind)
    assert bool(tool.calls) is tool_ran
    assert [str(e.kind) for e in events][-3:] == ["error", "agent_end", "task_finished"]


async def test_task_finished_audit_failure_is_reported_on_the_event_instead_of_crashing_the_pool(
    flavour: type[FailingSink],
) -> None:
    sink = flavour("task_finished")
    events = Stream(1000)
    async with open_pool(events=events) as pool:
        pool.register(Spec("a", model=ScriptedModel(["done"]), audit=sink))
        result = await (await pool.submit("a", "go")).wait()
    events.close()
    assert result.output == "done"
    last = [e async for e in events][-1]
    assert str(last.kind) == "task_finished"
    assert last.error == f"AuditError: the audit sink failed to record 'task_finished': {DISK_FULL}"


async def test_hung_task_finished_audit_does_not_swallow_the_terminal_event(
    autojump_clock: trio.testing.MockClock, flavour: type[FailingSink],
) -> None:
    # The bug: the task_finished entry and its event shared one bound, so a sink that
    # hung on the entry used it up and the event was never delivered.
    class HangingSink(flavour):  # type: ignore[valid-type,misc]
        async def record(self, record: ledger.Record) -> None:
            if record.kind == self.kind:
                await trio.sleep_forever()
            await self.inner.record(record)

    events = Stream(1000)
    async with open_pool(events=events) as pool:
        sink = HangingSink("task_finished", hang=True)
        pool.register(Spec("a", model=ScriptedModel(["done"]), audit=sink))
        result = await (await pool.submit("a", "go")).wait()
        assert trio.current_time() == END_TIMEOUT
    events.close()
    log = [e async for e in events]
    assert result.output == "done"
    assert str(log[-1].kind) == "task_finished"
    assert log[-1].error == "AuditError: the audit sink did not record 'task_finished' within 5s"
    check_events(log)
