"""subagent.otel: the exact span tree of a delegation tree, under the autojump clock."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import StatusCode

from agentcore import Message, ModelError, ToolCall
from agentcore.testing import Blocked, Delayed, RecordingTool, ScriptedModel, tool_call_reply
from subagent import Spec, SubagentTool, TaskCancelled, TaskFailed, open_pool
from subagent.otel import InstrumentationError, OtelStatistics, SpanLimits, instrument

from .otel_helpers import (
    EPOCH,
    NamedModel,
    delegate,
    failing_tool,
    memory_provider,
    named,
    pin_wall_clock,
    tree,
)

Clock = trio.testing.MockClock


@contextlib.contextmanager
def caplog_off() -> Iterator[None]:
    """Silence the SDK's log of the failing exporter (it logs, it does not raise)."""
    logger = logging.getLogger("opentelemetry")
    disabled, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = disabled


async def run_tree(
    provider: TracerProvider, *, capture_content: bool = False, caller_span: bool = True
) -> None:
    """lead starts bg in the background, then delegates to worker and waits; worker calls
    the failing tool, then delegates to leaf. Every model call takes one second."""
    async with open_pool() as pool:
        tool = SubagentTool(pool)
        pool.register(Spec("lead", model=NamedModel("m-lead", [
            delegate("bg", "look around", call_id="c-bg", wait=False),
            delegate("worker", "do the work", call_id="c-worker"),
            "all done",
        ]), tools=(tool,)))
        pool.register(Spec("worker", model=NamedModel("m-worker", [
            tool_call_reply("boom", "{}", id="c-boom"),
            delegate("leaf", "the detail", call_id="c-leaf"),
            "worked",
        ]), tools=(tool, failing_tool())))
        pool.register(Spec("leaf", model=NamedModel("m-leaf", ["leaf answer"])))
        pool.register(Spec("bg", model=NamedModel("m-bg", ["bg answer"])))
        with instrument(pool, tracer_provider=provider, capture_content=capture_content):
            if caller_span:
                with provider.get_tracer("test").start_as_current_span("request"):
                    task = await pool.submit("lead", "solve it")
            else:
                task = await pool.submit("lead", "solve it")
            await task.wait()


KEYS = ("gen_ai.tool.call.id", "error.type")

TREE = [
    "request {}",
    "  invoke_agent lead [0, 7] {}",
    "    chat m-lead [0, 1] {}",
    "    execute_tool subagent [1, 1] {'gen_ai.tool.call.id': 'c-bg'}",
    "    chat m-lead [1, 2] {}",
    "    invoke_agent bg [1, 2] {}",
    "      chat m-bg [1, 2] {}",
    "    execute_tool subagent [2, 6] {'gen_ai.tool.call.id': 'c-worker'}",
    "      invoke_agent worker [2, 6] {}",
    "        chat m-worker [2, 3] {}",
    "        execute_tool boom [3, 3] "
    "{'gen_ai.tool.call.id': 'c-boom', 'error.type': 'tool_error'}",
    "        chat m-worker [3, 4] {}",
    "        execute_tool subagent [4, 5] {'gen_ai.tool.call.id': 'c-leaf'}",
    "          invoke_agent leaf [4, 5] {}",
    "            chat m-leaf [4, 5] {}",
    "        chat m-worker [5, 6] {}",
    "    chat m-lead [6, 7] {}",
]

CONTENT = (
    "gen_ai.input.messages", "gen_ai.output.messages",
    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
)


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


async def test_the_span_tree_of_a_delegation_tree(
    autojump_clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_wall_clock(monkeypatch)
    provider, exporter = memory_provider()
    await run_tree(provider)
    spans = exporter.get_finished_spans()
    assert tree(spans, KEYS) == TREE
    # The background child links to the call that started it; no other span has links.
    (bg,) = named(spans, "invoke_agent bg")
    started_by = [s for s in named(spans, "execute_tool subagent")
                  if attributes(s)["gen_ai.tool.call.id"] == "c-bg"]
    assert [(link.context, dict(link.attributes or {})) for link in bg.links] == [
        (started_by[0].context, {"subagent.link": "started_by"})
    ]
    assert [s.name for s in spans if s.links and s is not bg] == []
    # Key attributes of each kind of span.
    (worker,) = named(spans, "invoke_agent worker")
    assert attributes(worker) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "worker",
        "gen_ai.request.model": "m-worker",
        "subagent.path": "lead/0001/worker/0003",
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 15,
    }
    assert worker.status.status_code is StatusCode.UNSET
    chat = named(spans, "chat m-worker")[0]
    assert attributes(chat) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m-worker",
        "gen_ai.response.model": "m-worker-2026",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
        "subagent.path": "lead/0001/worker/0003",
    }
    assert str(chat.kind) == "SpanKind.CLIENT"
    (boom,) = named(spans, "execute_tool boom")
    assert attributes(boom) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "boom",
        "gen_ai.tool.call.id": "c-boom",
        "gen_ai.tool.type": "function",
        "subagent.path": "lead/0001/worker/0003",
        "error.type": "tool_error",
    }
    assert (boom.status.status_code, boom.status.description) == (StatusCode.ERROR, None)
    # Content is off by default.
    assert [k for s in spans for k in attributes(s) if k in CONTENT] == []
    # One trace for the whole tree, under the caller's span.
    assert len({s.context.trace_id for s in spans}) == 1


async def test_without_a_caller_span_the_root_task_starts_the_trace(
    autojump_clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_wall_clock(monkeypatch)
    provider, exporter = memory_provider()
    await run_tree(provider, caller_span=False)
    spans = exporter.get_finished_spans()
    assert tree(spans, KEYS) == [line[2:] for line in TREE[1:]]
    (lead,) = named(spans, "invoke_agent lead")
    assert lead.parent is None
    assert len({s.context.trace_id for s in spans}) == 1


async def test_content_when_turned_on_is_redacted_and_capped(
    autojump_clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_wall_clock(monkeypatch)
    provider, exporter = memory_provider()
    await run_tree(provider, capture_content=True)
    spans = exporter.get_finished_spans()
    (boom,) = named(spans, "execute_tool boom")
    assert attributes(boom)["gen_ai.tool.call.arguments"] == "{}"
    assert attributes(boom)["gen_ai.tool.call.result"] == (
        "tool 'boom' failed: RuntimeError: disk on fire (key [REDACTED])"
    )
    (leaf,) = named(spans, "invoke_agent leaf")
    assert json.loads(str(attributes(leaf)["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "the detail"}]}
    ]
    assert json.loads(str(attributes(leaf)["gen_ai.output.messages"])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "leaf answer"}]}
    ]
    (chat,) = named(spans, "chat m-leaf")
    assert json.loads(str(attributes(chat)["gen_ai.output.messages"])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "leaf answer"}]}
    ]
    assert tree(spans, KEYS) == TREE


async def test_a_cancelled_task_ends_its_open_spans_as_cancelled(
    autojump_clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_wall_clock(monkeypatch)
    provider, exporter = memory_provider()
    slow = RecordingTool("slow", block=True)
    async with open_pool() as pool:
        pool.register(Spec("a", model=NamedModel("m", [
            tool_call_reply("slow", "{}", id="c-slow"), "never"
        ]), tools=(slow,)))
        handle = instrument(pool, tracer_provider=provider)
        task = await pool.submit("a", "x")
        await trio.sleep(5.0)
        task.cancel()
        with pytest.raises(TaskCancelled):
            await task.wait()
    spans = exporter.get_finished_spans()
    assert tree(spans, KEYS) == [
        "invoke_agent a [0, 5] {'error.type': 'cancelled'}",
        "  chat m [0, 1] {}",
        "  execute_tool slow [1, 5] {'gen_ai.tool.call.id': 'c-slow', 'error.type': 'cancelled'}",
    ]
    (invoke,) = named(spans, "invoke_agent a")
    assert invoke.status.status_code is StatusCode.ERROR
    assert handle.statistics() == OtelStatistics(3, 0, 0, 0, False)


async def test_a_failed_run_names_its_error_type(
    autojump_clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_wall_clock(monkeypatch)
    provider, exporter = memory_provider()
    async with open_pool() as pool:
        pool.register(Spec("a", model=ScriptedModel([
            Delayed(2.0, ModelError("the provider said no: sk-ant-api03-" + "y" * 40))
        ])))
        instrument(pool, tracer_provider=provider)
        with pytest.raises(TaskFailed):
            await (await pool.submit("a", "x")).wait()
    spans = exporter.get_finished_spans()
    assert tree(spans, KEYS) == [
        "invoke_agent a [0, 2] {'error.type': 'ModelError'}",
        "  chat [0, 2] {'error.type': 'ModelError'}",
    ]
    (invoke,) = named(spans, "invoke_agent a")
    assert invoke.status.description == "ModelError: the provider said no: [REDACTED]"


async def test_spans_past_max_open_spans_are_dropped_and_counted(
    autojump_clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_wall_clock(monkeypatch)
    provider, exporter = memory_provider()
    async with open_pool() as pool:
        pool.register(Spec("a", model=NamedModel("m", [
            Message("assistant", "", tool_calls=(
                ToolCall("c-1", "slow", "{}"), ToolCall("c-2", "slow", "{}")
            )),
            "done",
        ]), tools=(RecordingTool("slow", read_only=True, delay=1.0),)))
        handle = instrument(pool, tracer_provider=provider, limits=SpanLimits(max_open_spans=2))
        await (await pool.submit("a", "x")).wait()
        stats = handle.statistics()
    assert tree(exporter.get_finished_spans(), KEYS) == [
        "invoke_agent a [0, 3] {}",
        "  chat m [0, 1] {}",
        "  execute_tool slow [1, 2] {'gen_ai.tool.call.id': 'c-1'}",
        "  chat m [2, 3] {}",
    ]
    assert stats == OtelStatistics(4, 1, 0, 0, False)


async def test_names_ids_and_content_are_capped(
    autojump_clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_wall_clock(monkeypatch)
    provider, exporter = memory_provider()
    long_name = "t" * 5000
    async with open_pool() as pool:
        pool.register(Spec("a", model=NamedModel("m", [
            tool_call_reply(long_name, json.dumps({"x": "z" * 5000}), id="i" * 5000),
            "a" * 5000,
        ])))
        instrument(pool, tracer_provider=provider, capture_content=True,
                   limits=SpanLimits(max_attribute_length=20, max_content_length=30))
        await (await pool.submit("a", "x")).wait()
    spans = exporter.get_finished_spans()
    (tool,) = (s for s in spans if s.name.startswith("execute_tool"))
    assert tool.name == "execute_tool " + "t" * 7
    assert attributes(tool)["gen_ai.tool.name"] == "t" * 20
    assert attributes(tool)["gen_ai.tool.call.id"] == "i" * 20
    assert attributes(tool)["gen_ai.tool.call.arguments"] == '{"x": "' + "z" * 23
    assert attributes(tool)["gen_ai.tool.call.result"] == "unknown tool '" + "t" * 16
    (invoke,) = named(spans, "invoke_agent a")
    assert json.loads(str(attributes(invoke)["gen_ai.output.messages"])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "a" * 30}]}
    ]


class RaisingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise OSError("the collector is gone")


class BlockedExporter(SpanExporter):
    """An exporter whose export waits (in the processor's thread) until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(60)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


async def test_an_exporter_that_raises_or_hangs_does_not_stop_the_pool(
    autojump_clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_wall_clock(monkeypatch)
    blocked = BlockedExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(RaisingExporter()))
    provider.add_span_processor(BatchSpanProcessor(blocked, max_export_batch_size=1))
    with caplog_off():
        async with open_pool() as pool:
            model = ScriptedModel(lambda request: Delayed(1.0, "one"))
            pool.register(Spec("a", model=model))
            handle = instrument(pool, tracer_provider=provider)
            results = [await (await pool.submit("a", str(i))).wait() for i in range(20)]
        assert [r.output for r in results] == ["one"] * 20
        assert trio.current_time() == 20.0
        assert handle.statistics() == OtelStatistics(40, 0, 0, 0, False)
        blocked.release.set()
        provider.shutdown()
    assert blocked.exported == 40


async def test_instrument_twice_is_refused_and_close_ends_what_is_open(
    autojump_clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_wall_clock(monkeypatch)
    provider, exporter = memory_provider()
    model = ScriptedModel([Blocked("never")])
    async with open_pool() as pool:
        pool.register(Spec("a", model=model))
        handle = instrument(pool, tracer_provider=provider)
        with pytest.raises(InstrumentationError) as refused:
            instrument(pool, tracer_provider=provider)
        assert str(refused.value) == "the pool is instrumented already"
        task = await pool.submit("a", "x")
        await trio.testing.wait_all_tasks_blocked()
        monkeypatch.setattr(time, "time_ns", lambda: (EPOCH + 3) * 1_000_000_000)
        await trio.sleep(3.0)
        handle.close()
        handle.close()
        assert pool._observer is None
        assert handle.statistics() == OtelStatistics(1, 0, 0, 0, True)
        instrument(pool, tracer_provider=provider).close()  # free again
        task.cancel()
    assert tree(exporter.get_finished_spans(), KEYS) == [
        "invoke_agent a [0, 3] {'error.type': 'unfinished'}",
    ]


async def test_an_api_failure_is_counted_never_raised_into_the_run(
    autojump_clock: Clock,
) -> None:
    class BrokenTracer(trace.NoOpTracer):
        def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
            raise RuntimeError("broken tracer")

    class BrokenProvider(trace.NoOpTracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
            return BrokenTracer()

    async with open_pool() as pool:
        pool.register(Spec("a", model=NamedModel("m", ["fine"])))
        handle = instrument(pool, tracer_provider=BrokenProvider())
        result = await (await pool.submit("a", "x")).wait()
    assert result.output == "fine"
    assert handle.statistics().observer_errors == 1
