"""Audit entries into a sink that never blocks (issue 17): recorded with its
``record_nowait``, not awaited; cancelled recorders still record nothing, end entries
are recorded without a scope, and a failing ``record_nowait`` fails closed as ``record``
does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

import ledger
from agentcore import Agent, AuditError, EndReason
from agentcore._audit import record, record_now, record_within
from agentcore.testing import Blocked, RecordingTool, ScriptedModel, tool_call_reply
from ledger import MemorySink, Record
from ledger._offload import OFFLOAD_CHARS
from tests._failing_sink import DISK_FULL
from tests.agentcore._support import Recorder
from tests.agentcore.test_audit_failure import FAILURES


class NowaitFailingSink:
    """A MemorySink behind ``record_nowait`` only (``record`` must not be called), that
    raises on entries of one kind; counts the awaited calls."""

    def __init__(self, kind: str = "") -> None:
        self.kind = kind
        self.inner = MemorySink()
        self.awaited = 0

    def record_nowait(self, entry: Record) -> None:
        if entry.kind == self.kind:
            raise OSError(28, "No space left on device")
        self.inner.record_nowait(entry)

    async def record(self, entry: Record) -> None:
        self.awaited += 1
        await self.inner.record(entry)

    async def aclose(self) -> None:
        await self.inner.aclose()

    @property
    def kinds(self) -> list[str]:
        return [str(e.kind) for e in self.inner.entries]


async def test_record_into_a_memory_sink_never_yields() -> None:
    # MemorySink.record yields once every 64 records; through record_nowait, never.
    sink = MemorySink()
    other_ran = False

    async def other() -> None:
        nonlocal other_ran
        other_ran = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        for _ in range(200):
            await record(sink, Record("prompt"))
        assert not other_ran
    assert sink.statistics().recorded == 200


async def test_a_cancelled_record_records_nothing() -> None:
    sink = NowaitFailingSink()
    with trio.CancelScope() as scope:
        scope.cancel()
        await record(sink, Record("prompt"))
    assert scope.cancelled_caught
    assert (sink.kinds, sink.awaited) == ([], 0)


async def test_record_now_records_while_cancelled_and_is_not_a_checkpoint() -> None:
    sink = NowaitFailingSink()
    with trio.CancelScope() as scope:
        scope.cancel()
        with trio.testing.assert_no_checkpoints():
            assert record_now(sink, Record("abort")) is True
            await record_within(sink, Record("task_cancelled"), 5.0, shield=True)
    assert not scope.cancelled_caught
    assert sink.kinds == ["abort", "task_cancelled"]


async def test_without_record_nowait_record_now_records_nothing() -> None:
    class Plain:
        async def record(self, entry: Record) -> None:
            raise AssertionError("not awaited by record_now")

    assert record_now(Plain(), Record("x")) is False  # type: ignore[arg-type]


async def test_a_failing_record_nowait_is_an_audit_error_everywhere() -> None:
    sink = NowaitFailingSink("x")
    text = f"the audit sink failed to record 'x': {DISK_FULL}"
    attempts: list[Callable[[], Awaitable[None]]] = [
        lambda: record(sink, Record("x")),
        lambda: record_within(sink, Record("x"), 1.0),
        lambda: record_within(sink, Record("x"), 1.0, shield=True),
    ]
    for attempt in attempts:
        with pytest.raises(AuditError) as info:
            await attempt()
        assert str(info.value) == text
        assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(AuditError) as direct:
        record_now(sink, Record("x"))
    assert str(direct.value) == text
    assert sink.awaited == 0


async def test_a_large_record_falls_back_to_awaiting_the_sink() -> None:
    sink = NowaitFailingSink()
    large = Record("tool_result", result="x" * (OFFLOAD_CHARS + 1))
    assert record_now(sink, large) is False
    assert sink.kinds == []
    await record(sink, large)
    await record_within(sink, large, 5.0, shield=True)
    assert (sink.kinds, sink.awaited) == (["tool_result", "tool_result"], 2)


async def run_with(kind: str) -> tuple[Any, RecordingTool, NowaitFailingSink, Recorder]:
    tool = RecordingTool("echo")
    sink = NowaitFailingSink(kind)
    emit = Recorder()
    model = ScriptedModel([tool_call_reply("echo", id="c1"), "done"])
    agent = Agent(model=model, tools=[tool], audit=sink)
    return await agent.run("go", emit=emit), tool, sink, emit


@pytest.mark.parametrize(("kind", "tool_ran", "recorded"), FAILURES)
async def test_a_run_fails_closed_through_record_nowait(
    kind: str, tool_ran: bool, recorded: list[str]
) -> None:
    # The same table as test_audit_failure's, with the sink's record_nowait failing.
    result, tool, sink, emit = await run_with(kind)
    text = f"AuditError: the audit sink failed to record {kind!r}: {DISK_FULL}"
    assert result.summary.end_reason is EndReason.error
    assert result.summary.error == text
    assert isinstance(result.exception, AuditError)
    assert bool(tool.calls) is tool_ran
    assert sink.kinds == recorded
    assert emit.kinds[-2:] == ["error", "agent_end"]
    assert emit.events[-2].text == text
    assert sink.awaited == 0


async def test_a_failing_run_end_through_record_nowait_ends_the_run_error() -> None:
    result, tool, sink, emit = await run_with("run_end")
    assert (tool.calls, result.output) == (["{}"], "done")
    assert result.summary.end_reason is EndReason.error
    assert result.summary.error == (
        f"AuditError: the audit sink failed to record 'run_end': {DISK_FULL}"
    )
    assert emit.events[-1].summary == result.summary
    assert sink.awaited == 0


async def test_an_aborted_run_records_its_end_without_awaiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sink = NowaitFailingSink("abort")
    emit = Recorder()
    agent = Agent(model=ScriptedModel([Blocked("late")]), audit=sink)
    with trio.move_on_after(3) as scope:
        await agent.run("go", emit=emit)
    assert scope.cancelled_caught
    assert sink.kinds == ["prompt", "run_end"]
    assert [(str(e.kind), e.text) for e in emit.events[-2:]] == [
        ("error", f"AuditError: the audit sink failed to record 'abort': {DISK_FULL}"),
        ("agent_end", ""),
    ]
    assert sink.inner.entries[1].duration == 3.0
    assert sink.awaited == 0


async def test_a_run_aborted_before_it_starts_records_no_prompt() -> None:
    # A cancelled recorder records nothing, through record_nowait as through record.
    sink = ledger.MemorySink()
    run = Agent(model=ScriptedModel(["never"]), audit=sink).new_run("go")
    run.abort("no")
    result = await run.run()
    assert result.summary.end_reason is EndReason.aborted
    assert [str(e.kind) for e in sink.entries] == ["abort", "run_end"]
    assert sink.entries[0].error == "no"
