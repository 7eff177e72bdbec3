"""A sink's overrides are called (issue 33 item 4): a subclass of MemorySink that
overrides ``record`` has it awaited for every entry, never the inherited
``record_nowait`` or ``record_fields_nowait``; one that overrides a fast path has
that override called. A failing override fails closed."""

from __future__ import annotations

from typing import Any

import pytest

from agentcore import Agent, AuditError, EndReason
from agentcore._fastpath import paths
from agentcore.testing import RecordingTool, ScriptedModel, tool_call_reply
from ledger import MemorySink, Record
from tests._failing_sink import DISK_FULL
from tests.agentcore.test_audit_failure import FAILURES

# The entries of a run calling one tool, then answering.
KINDS = ["prompt", "model_response", "tool_request", "gate_decision", "tool_result",
         "model_response", "run_end"]


class Forwarding(MemorySink):
    """Overrides ``record`` only: forwards every entry's kind (or fails on one kind)."""

    def __init__(self, fail: str = "") -> None:
        super().__init__()
        self.fail = fail
        self.seen: list[str] = []

    async def record(self, record: Record) -> None:
        self.seen.append(str(record.kind))
        if record.kind == self.fail:
            raise OSError(28, "No space left on device")
        await super().record(record)


class NowaitOnly(MemorySink):
    """Overrides ``record_nowait`` only."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def record_nowait(self, record: Record) -> None:
        self.seen.append(str(record.kind))
        super().record_nowait(record)


class Both(Forwarding):
    """Overrides ``record`` and ``record_nowait`` (the latter the synchronous form of
    the former)."""

    def record_nowait(self, record: Record) -> None:
        self.seen.append(f"nowait {record.kind}")
        super().record_nowait(record)


class FieldsOnly(MemorySink):
    """Overrides ``record_fields_nowait`` only."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def record_fields_nowait(self, kind: str, *rest: Any) -> None:
        self.seen.append(kind)
        super().record_fields_nowait(kind, *rest)


class FieldsUnderRecord(Forwarding):
    """Overrides ``record``, and ``record_fields_nowait`` below it (so both stand
    for its ``record``), not ``record_nowait``."""

    def record_fields_nowait(self, kind: str, *rest: Any) -> None:
        self.seen.append(f"fields {kind}")
        super().record_fields_nowait(kind, *rest)


async def run(sink: MemorySink) -> tuple[Any, RecordingTool]:
    tool = RecordingTool("echo")
    model = ScriptedModel([tool_call_reply("echo", id="c1"), "done"])
    return await Agent(model=model, tools=[tool], audit=sink).run("go"), tool


def test_which_fast_paths_each_class_may_take() -> None:
    assert paths(MemorySink) == (True, True)
    assert paths(Forwarding) == (False, False)
    assert paths(NowaitOnly) == (True, False)
    assert paths(Both) == (True, False)
    assert paths(FieldsOnly) == (True, True)
    # record_nowait is MemorySink's, above the overridden record: not taken; the
    # fields path is defined below that record, so it stands for it.
    assert paths(FieldsUnderRecord) == (False, True)


async def test_an_overridden_record_is_awaited_for_every_entry() -> None:
    sink = Forwarding()
    result, tool = await run(sink)
    assert result.summary.end_reason is EndReason.stop
    assert tool.calls == ["{}"]
    assert sink.seen == KINDS
    assert [str(e.kind) for e in sink.entries] == KINDS


async def test_an_overridden_record_nowait_is_called_for_every_entry() -> None:
    sink = NowaitOnly()
    result, _ = await run(sink)
    assert result.summary.end_reason is EndReason.stop
    assert sink.seen == KINDS
    assert [str(e.kind) for e in sink.entries] == KINDS


async def test_overriding_both_takes_the_overridden_fast_path() -> None:
    sink = Both()
    result, _ = await run(sink)
    assert result.summary.end_reason is EndReason.stop
    assert sink.seen == [f"nowait {k}" for k in KINDS]


async def test_an_overridden_record_fields_nowait_is_called_for_every_entry() -> None:
    sink = FieldsOnly()
    result, _ = await run(sink)
    assert result.summary.end_reason is EndReason.stop
    assert sink.seen == KINDS


async def test_fields_below_an_overridden_record_are_taken() -> None:
    sink = FieldsUnderRecord()
    result, _ = await run(sink)
    assert result.summary.end_reason is EndReason.stop
    assert sink.seen == [f"fields {k}" for k in KINDS]


@pytest.mark.parametrize(("kind", "tool_ran", "recorded"), FAILURES)
async def test_a_failing_record_override_fails_closed(
    kind: str, tool_ran: bool, recorded: list[str]
) -> None:
    sink = Forwarding(kind)
    result, tool = await run(sink)
    assert result.summary.end_reason is EndReason.error
    assert result.summary.error == (
        f"AuditError: the audit sink failed to record {kind!r}: {DISK_FULL}"
    )
    assert isinstance(result.exception, AuditError)
    assert bool(tool.calls) is tool_ran
    assert [str(e.kind) for e in sink.entries] == recorded


async def test_a_pool_awaits_an_overridden_record() -> None:
    # The case: a pool's task entries and its run's, all through the override.
    from subagent import Defaults, Spec, open_pool

    sink = Forwarding()
    async with open_pool(defaults=Defaults(audit=sink)) as pool:
        pool.register(Spec("w", model=ScriptedModel(["done"])))
        result = await (await pool.submit("w", "go")).wait()
    assert result.output == "done"
    assert sink.seen == [
        "task_queued", "task_started", "prompt", "model_response", "run_end",
        "task_finished",
    ]
    assert [str(e.kind) for e in sink.entries] == sink.seen


async def test_a_method_set_on_an_instance_is_no_fast_path() -> None:
    class Plain:
        def __init__(self) -> None:
            self.inner = MemorySink()
            self.record_nowait = self.inner.record_nowait
            self.awaited = 0

        async def record(self, record: Record) -> None:
            self.awaited += 1
            await self.inner.record(record)

        async def aclose(self) -> None:
            await self.inner.aclose()

    sink = Plain()
    result = await Agent(model=ScriptedModel(["done"]), audit=sink).run("go")
    assert result.summary.end_reason is EndReason.stop
    assert sink.awaited == 3
    assert [str(e.kind) for e in sink.inner.entries] == ["prompt", "model_response", "run_end"]
