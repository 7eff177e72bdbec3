"""Pieces of the OpenTelemetry tests: a pinned wall clock, a traced pool, the span tree as text."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import pytest
import trio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentcore import Message, ModelResponse, Usage
from agentcore.testing import Delayed, RecordingTool, ScriptedModel, tool_call_reply

#: The epoch second the pinned wall clock starts at (trio's virtual time 0).
EPOCH = 1_800_000_000


def pin_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Events take their time from time.time: make it EPOCH plus trio's virtual time."""
    monkeypatch.setattr(time, "time", lambda: EPOCH + trio.current_time())


def memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    """A tracer provider that keeps its finished spans in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


class NamedModel(ScriptedModel):
    """A scripted model with a configured model name; each reply takes one virtual second."""

    def __init__(self, model: str, replies: Sequence[str | Message]) -> None:
        super().__init__(
            [Delayed(1.0, r) for r in replies], usage=Usage(10, 5, model=f"{model}-2026")
        )
        self.model = model


def delegate(agent: str, task: str, *, call_id: str, wait: bool = True) -> Message:
    """A reply that calls the delegation tool."""
    arguments = json.dumps({"agent": agent, "task": task, "wait": wait})
    return tool_call_reply("subagent", arguments, id=call_id)


def failing_tool() -> RecordingTool:
    """A tool that raises."""
    return RecordingTool("boom", RuntimeError("disk on fire (key sk-ant-api03-" + "x" * 40 + ")"))


def _seconds(ns: int | None) -> float:
    assert ns is not None
    return ns / 1e9 - EPOCH


def tree(spans: Sequence[ReadableSpan], keys: Sequence[str] = ()) -> list[str]:
    """The spans as indented lines ``name [start, end] attributes`` (times in virtual
    seconds), children under their parent in order of start, then end, then name; a
    span whose parent is not among them is a root."""
    by_id = {s.context.span_id: s for s in spans}
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in spans:
        parent = s.parent.span_id if s.parent is not None else None
        children.setdefault(parent if parent in by_id else None, []).append(s)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        found = sorted(children.get(parent, []), key=lambda s: (s.start_time, s.end_time, s.name))
        for s in found:
            attributes = s.attributes or {}
            shown: dict[str, Any] = {k: attributes[k] for k in keys if k in attributes}
            times = ""
            if "subagent.path" in attributes:  # the caller's own span has real times
                times = f" [{_seconds(s.start_time):g}, {_seconds(s.end_time):g}]"
            lines.append(f"{'  ' * depth}{s.name}{times} {shown}")
            walk(s.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    """The spans called ``name``, in order of start."""
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def reply(text: str) -> ModelResponse:
    """A final answer."""
    return ModelResponse(Message("assistant", text))
