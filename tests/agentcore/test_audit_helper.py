"""The one audit helper (agentcore._audit): an entry is recorded, or the caller gets an
AuditError with the same text in every layer (issue 16)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentcore import AuditError
from agentcore._audit import NOTHING_TO_RECORD, batch_failure, overrun, record, record_within
from ledger import Record
from tests._failing_sink import DISK_FULL, FailingSink


async def test_record_passes_the_entry_to_the_sink() -> None:
    sink = FailingSink("other")
    await record(sink, Record("prompt", "run-1", ("a",), arguments="hi"))
    assert sink.kinds == ["prompt"]
    assert sink.inner.entries[0].arguments == "hi"


async def test_a_sink_that_raises_becomes_an_audit_error_with_its_cause() -> None:
    sink = FailingSink("prompt")
    with pytest.raises(AuditError) as info:
        await record(sink, Record("prompt"))
    assert str(info.value) == f"the audit sink failed to record 'prompt': {DISK_FULL}"
    assert isinstance(info.value.__cause__, OSError)


async def test_a_message_without_text_names_the_type_alone() -> None:
    class Silent:
        async def record(self, entry: Record) -> None:
            raise KeyError

    with pytest.raises(AuditError, match=r"^the audit sink failed to record 'x': KeyError$"):
        await record(Silent(), Record("x"))  # type: ignore[arg-type]


async def test_record_within_turns_an_overrun_into_an_audit_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sink = FailingSink("run_end", hang=True)
    with pytest.raises(AuditError) as info:
        await record_within(sink, Record("run_end"), 2.5)
    assert str(info.value) == "the audit sink did not record 'run_end' within 2.5s"
    assert str(info.value) == str(overrun("run_end", 2.5))
    assert trio.current_time() == 2.5


async def test_record_within_shielded_outlives_an_outer_cancel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sink = FailingSink("task_end", hang=True)
    with trio.CancelScope() as outer:
        outer.cancel()
        with pytest.raises(AuditError, match="within 3s"):
            await record_within(sink, Record("task_end"), 3.0, shield=True)
    assert trio.current_time() == 3.0


async def test_record_within_in_time_records_once(autojump_clock: trio.testing.MockClock) -> None:
    sink = FailingSink("other")
    await record_within(sink, Record("prompt"), 1.0)
    assert sink.kinds == ["prompt"]
    assert trio.current_time() == 0.0


def test_batch_failure_names_the_first_and_counts_them() -> None:
    group = BaseExceptionGroup(
        "batch", [AuditError("first"), BaseExceptionGroup("inner", [AuditError("second")])]
    )
    failure = batch_failure(group)
    assert failure is not None
    assert str(failure) == (
        "first (the first of 2 entries of one batch of parallel tool calls "
        "that could not be recorded)"
    )
    assert str(batch_failure(BaseExceptionGroup("one", [AuditError("only")]))) == "only"
    mixed = BaseExceptionGroup("mixed", [AuditError("a"), KeyboardInterrupt()])
    assert batch_failure(mixed) is None
    assert batch_failure(ExceptionGroup("other", [ValueError("v")])) is None


async def test_nothing_to_record_completes_without_a_checkpoint() -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        await NOTHING_TO_RECORD
        await NOTHING_TO_RECORD
    assert not scope.cancelled_caught
