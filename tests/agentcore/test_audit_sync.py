"""The synchronous audit path (issue 17): ``record_sync`` records into a sink with
``record_nowait`` from synchronous code when the task is not cancelled, and leaves
everything else (a cancelled task, a sink to await, a large record) to ``record``,
which keeps "a cancelled recorder records nothing"."""

from __future__ import annotations

import pytest
import trio

from agentcore import Agent, AuditError
from agentcore._audit import record, record_sync
from agentcore.testing import RecordingTool, ScriptedModel, tool_call_reply
from ledger import MemorySink, Record
from ledger._offload import OFFLOAD_CHARS
from tests._failing_sink import DISK_FULL
from tests.agentcore.test_audit_nowait import NowaitFailingSink


class AwaitedOnly:
    """A sink without ``record_nowait``."""

    def __init__(self) -> None:
        self.inner = MemorySink()

    async def record(self, entry: Record) -> None:
        await self.inner.record(entry)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_record_sync_records_and_is_not_a_checkpoint() -> None:
    sink = NowaitFailingSink()
    other_ran = False

    async def other() -> None:
        nonlocal other_ran
        other_ran = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        assert [record_sync(sink, Record("prompt")) for _ in range(3)] == [True] * 3
        assert not other_ran
    assert (sink.kinds, sink.awaited) == (["prompt"] * 3, 0)


async def test_a_cancelled_task_records_nothing_synchronously() -> None:
    sink = NowaitFailingSink()
    with trio.CancelScope() as scope:
        scope.cancel()
        assert record_sync(sink, Record("prompt")) is False
        assert sink.kinds == []
        await record(sink, Record("prompt"))  # what the caller does next: raises Cancelled
    assert scope.cancelled_caught
    assert (sink.kinds, sink.awaited) == ([], 0)


async def test_a_shielded_scope_inside_a_cancelled_one_records() -> None:
    sink = NowaitFailingSink()
    with trio.CancelScope() as outer:
        outer.cancel()
        with trio.CancelScope(shield=True):
            assert record_sync(sink, Record("abort")) is True
            await trio.lowlevel.checkpoint()  # shielded: not cancelled
        assert record_sync(sink, Record("abort")) is False
        await trio.lowlevel.checkpoint()
    assert outer.cancelled_caught
    assert sink.kinds == ["abort"]


async def test_a_sink_to_await_and_a_large_record_are_left_to_record() -> None:
    awaited = AwaitedOnly()
    assert record_sync(awaited, Record("prompt")) is False
    assert awaited.inner.entries == []
    sink = NowaitFailingSink()
    large = Record("tool_result", result="x" * (OFFLOAD_CHARS + 1))
    assert record_sync(sink, large) is False
    assert sink.kinds == []


async def test_a_failing_record_nowait_is_an_audit_error() -> None:
    sink = NowaitFailingSink("prompt")
    with pytest.raises(AuditError) as caught:
        record_sync(sink, Record("prompt"))
    assert str(caught.value) == f"the audit sink failed to record 'prompt': {DISK_FULL}"
    assert isinstance(caught.value.__cause__, OSError)


@pytest.mark.parametrize("make", [NowaitFailingSink, MemorySink])
async def test_a_run_cancelled_between_entries_records_no_more(
    make: type[NowaitFailingSink] | type[MemorySink],
) -> None:
    # The tool cancels the run's scope: the run's next entry (tool_result) finds the
    # task cancelled and is not recorded; the run ends aborted with its end entries
    # (not cancellable). A MemorySink takes the run's entries as their fields.
    sink = make()
    scope = trio.CancelScope()

    def cancel(_arguments: str) -> str:
        scope.cancel()
        return "ok"

    tool = RecordingTool("echo", cancel)
    model = ScriptedModel([tool_call_reply("echo", id="c1"), "done"])
    agent = Agent(model=model, tools=[tool], audit=sink)
    with scope:
        await agent.run("go")
    assert scope.cancelled_caught
    kinds = sink.kinds if isinstance(sink, NowaitFailingSink) else [e.kind for e in sink.entries]
    assert kinds == [
        "prompt", "model_response", "tool_request", "gate_decision", "abort", "run_end"
    ]
    if isinstance(sink, NowaitFailingSink):
        assert sink.awaited == 0


@pytest.mark.parametrize("size", [10, OFFLOAD_CHARS + 1])
async def test_the_prompt_is_recorded_once_whether_or_not_it_is_awaited(size: int) -> None:
    # A prompt the sink takes at once (audit_sync), and one too large for that (more
    # than 64 KiB: redacted in a worker thread, awaited): each is one entry.
    sink = MemorySink()
    prompt = "p" * size
    await Agent(model=ScriptedModel(["done"]), audit=sink).run(prompt)
    assert [e.kind for e in sink.entries] == ["prompt", "model_response", "run_end"]
    assert sink.entries[0].arguments == prompt


async def test_a_run_cancelled_before_its_prompt_records_no_prompt() -> None:
    # Cancelled before its first entry: the prompt finds the task cancelled, is not
    # recorded, and the run ends aborted with its end entries.
    sink = MemorySink()
    with trio.CancelScope() as scope:
        scope.cancel()
        await Agent(model=ScriptedModel(["done"]), audit=sink).run("go")
    assert [e.kind for e in sink.entries] == ["abort", "run_end"]
    assert sink.entries[1].data["end_reason"] == "aborted"
