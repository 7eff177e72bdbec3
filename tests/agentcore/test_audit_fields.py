"""A run's entries as their fields (issue 17): ``record_fields_sync`` gives a sink with
``record_fields_nowait`` the fields themselves (no Record built), keeps "a cancelled
recorder records nothing", returns the entry for the caller to await when the sink
would block, and fails closed with the same AuditError as every other path."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from agentcore import Agent, AuditError, EndReason
from agentcore._audit import record, record_fields_sync
from agentcore.testing import RecordingTool, ScriptedModel, tool_call_reply
from ledger import MemorySink, Record
from ledger._offload import OFFLOAD_CHARS
from tests._failing_sink import DISK_FULL, FieldsFailingSink
from tests.agentcore.test_audit_failure import FAILURES
from tests.agentcore.test_audit_nowait import NowaitFailingSink
from tests.agentcore.test_audit_sync import AwaitedOnly

_PATH = ("w/0001",)


class Spy:
    """A sink taking fields only: what it was given, and no Record among it."""

    def __init__(self) -> None:
        self.given: list[tuple[Any, ...]] = []

    def record_fields_nowait(self, *fields: Any) -> None:
        self.given.append(fields)

    async def record(self, entry: Record) -> None:
        raise AssertionError("awaited")

    async def aclose(self) -> None:
        pass


async def test_the_fields_are_given_as_they_are_and_nothing_waits() -> None:
    spy = Spy()
    data: dict[str, Any] = {"turns": 2}
    with trio.testing.assert_no_checkpoints():
        assert record_fields_sync(
            spy, True, "run_end", "r", _PATH, "a", error="boom", duration=0.5, data=data
        ) is None
    [given] = spy.given
    assert given == ("run_end", "r", _PATH, "a", None, None, None, None, None, None,
                     "boom", 0.5, {"turns": 2})
    assert given[2] is _PATH and given[12] is data


async def test_a_memory_sink_gets_the_entry_the_record_path_gives() -> None:
    fields = MemorySink(clock=lambda: "t")
    records = MemorySink(clock=lambda: "t")
    assert record_fields_sync(fields, True, "tool_result", "r", _PATH, "a", tool="echo",
                              call_id="c1", result="ok", duration=0.25) is None
    await record(records, Record("tool_result", "r", _PATH, "a", tool="echo", call_id="c1",
                                 result="ok", duration=0.25))
    assert fields.entries == records.entries


async def test_a_cancelled_recorder_records_nothing_unless_it_records_an_end() -> None:
    sink = MemorySink()
    with trio.CancelScope() as scope:
        scope.cancel()
        entry = record_fields_sync(sink, True, "prompt", "r", _PATH, "a", arguments="hi")
        assert entry == Record("prompt", "r", _PATH, "a", arguments="hi")
        assert sink.statistics().recorded == 0
        assert record_fields_sync(sink, False, "abort", "r", _PATH, "a", error="x") is None
        assert entry is not None
        await record(sink, entry)  # what the caller does next: raises Cancelled
    assert scope.cancelled_caught
    assert [e.kind for e in sink.entries] == ["abort"]


async def test_a_record_that_would_block_is_returned_to_await() -> None:
    sink = MemorySink()
    text = "x" * (OFFLOAD_CHARS + 1)
    entry = record_fields_sync(sink, True, "tool_result", "r", _PATH, "a", result=text)
    assert entry == Record("tool_result", "r", _PATH, "a", result=text)
    assert sink.statistics().recorded == 0
    assert entry is not None
    await record(sink, entry)  # redacted in a worker thread
    assert [e.result for e in sink.entries] == [text]


async def test_sinks_without_fields_take_the_record_path() -> None:
    nowait = NowaitFailingSink()
    assert record_fields_sync(nowait, True, "prompt", "r", _PATH, "a") is None
    assert (nowait.kinds, nowait.awaited) == (["prompt"], 0)
    awaited = AwaitedOnly()
    for cancellable in (True, False):
        entry = record_fields_sync(awaited, cancellable, "prompt", "r", _PATH, "a")
        assert entry == Record("prompt", "r", _PATH, "a")
    assert awaited.inner.entries == []


@pytest.mark.parametrize("cancellable", [True, False])
async def test_a_failing_sink_is_an_audit_error(cancellable: bool) -> None:
    for sink in (FieldsFailingSink("prompt"), NowaitFailingSink("prompt")):
        with pytest.raises(AuditError) as caught:
            record_fields_sync(sink, cancellable, "prompt", "r", _PATH, "a")
        assert str(caught.value) == f"the audit sink failed to record 'prompt': {DISK_FULL}"
        assert isinstance(caught.value.__cause__, OSError)
        assert sink.kinds == []


@pytest.mark.parametrize(("kind", "tool_ran", "recorded"), [
    *FAILURES,
    ("run_end", True, ["prompt", "model_response", "tool_request", "gate_decision",
                       "tool_result", "model_response"]),
])
async def test_a_run_fails_closed_through_its_fields(
    kind: str, tool_ran: bool, recorded: list[str]
) -> None:
    # test_audit_failure's table, with the sink's record_fields_nowait failing: every
    # entry of the run goes through it, none is awaited.
    tool = RecordingTool("echo")
    sink = FieldsFailingSink(kind)
    model = ScriptedModel([tool_call_reply("echo", id="c1"), "done"])
    result = await Agent(model=model, tools=[tool], audit=sink).run("go")
    assert result.summary.end_reason is EndReason.error
    assert result.summary.error == (
        f"AuditError: the audit sink failed to record {kind!r}: {DISK_FULL}"
    )
    assert bool(tool.calls) is tool_ran
    assert sink.kinds == recorded
    assert sink.taken == len(recorded)


async def test_a_run_records_into_a_fields_sink_from_its_own_methods() -> None:
    # A run's entries reach a sink with record_fields_nowait from audit_sync and
    # audit_now themselves: the same entries record_fields_sync gives, nothing awaited.
    sink = MemorySink(clock=lambda: "t")
    model = ScriptedModel([tool_call_reply("echo", id="c1"), "done"])
    run = Agent(model=model, tools=[RecordingTool("echo")], audit=sink).new_run("go")
    with trio.testing.assert_no_checkpoints():
        assert run.audit_sync("x", tool="t", data={"n": 1}) is None
        assert run.audit_now("y", error="e") is True
    assert [(e.kind, e.tool, e.error, dict(e.data)) for e in sink.entries] == [
        ("x", "t", None, {"n": 1}), ("y", None, "e", {})
    ]
    assert Agent(model=model).new_run("go").audit_now("y") is True


async def test_a_run_awaits_its_large_entries_and_keeps_their_order() -> None:
    # A tool result over 64 KiB: the sink raises trio.WouldBlock, the run awaits it
    # (redacted in a worker thread), and the entries keep their order.
    large = "x" * (OFFLOAD_CHARS + 1)
    sink = MemorySink()
    tool = RecordingTool("echo", lambda _arguments: large)
    model = ScriptedModel([tool_call_reply("echo", id="c1"), "done"])
    result = await Agent(model=model, tools=[tool], audit=sink).run("go")
    assert result.summary.end_reason is EndReason.stop
    assert [e.kind for e in sink.entries] == [
        "prompt", "model_response", "tool_request", "gate_decision", "tool_result",
        "model_response", "run_end",
    ]
    assert sink.entries[4].result == large
