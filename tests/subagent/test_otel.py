"""subagent.otel: the exact span tree of a delegation tree, under the autojump clock."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import StatusCode

from agentcore.testing import Blocked, RecordingTool, ScriptedModel, tool_call_reply
from subagent import Spec, SubagentTool, open_pool
from subagent.otel import instrument

from .otel_helpers import (
    NamedModel,
    delegate,
    failing_tool,
    memory_provider,
    named,
    pin_wall_clock,
    tree,
)

Clock = trio.testing.MockClock


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
    "        execute_tool boom [3, 3] {'gen_ai.tool.call.id': 'c-boom', 'error.type': 'tool_error'}",
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
