"""subagent.otel over the real adapters and a socket: provider, model and usage on spans."""

from __future__ import annotations

from opentelemetry.trace import SpanKind

from subagent import Spec, open_pool
from subagent.otel import instrument
from tests.models._fakeapi import FakeAPI
from tests.subagent.otel_helpers import memory_provider, named

from ._fakeapi import sse, sse_reply
from .test_usage_wire import (
    ANTHROPIC_USAGE,
    OPENAI_USAGE,
    anthropic,
    anthropic_stream,
    chunk,
    openai,
)


async def test_chat_spans_name_the_provider_and_the_models(api: FakeAPI) -> None:
    # The runs stream (the adapters can).
    api.replies.append(sse_reply([
        chunk(choices=[{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]),
        chunk(choices=[], usage=OPENAI_USAGE),
        sse("[DONE]"),
    ]))
    api.replies.append(anthropic_stream(ANTHROPIC_USAGE))
    provider, exporter = memory_provider()
    async with open_pool() as pool:
        pool.register(Spec("gpt", model=openai(api)))
        pool.register(Spec("claude", model=anthropic(api)))
        instrument(pool, tracer_provider=provider)
        await (await pool.submit("gpt", "hi")).wait()
        await (await pool.submit("claude", "hi")).wait()
    spans = exporter.get_finished_spans()
    (gpt,) = named(spans, "chat gpt-4o-mini")
    assert gpt.kind is SpanKind.CLIENT
    assert dict(gpt.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.provider.name": "openai",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.usage.input_tokens": 1000,
        "gen_ai.usage.output_tokens": 50,
        "subagent.path": "gpt/0001",
    }
    (claude,) = named(spans, "chat claude-haiku-4-5")
    assert dict(claude.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "claude-haiku-4-5",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.response.model": "claude-haiku-4-5-20251001",
        "gen_ai.usage.input_tokens": 2110,
        "gen_ai.usage.output_tokens": 42,
        "subagent.path": "claude/0002",
    }
    (invoke,) = named(spans, "invoke_agent claude")
    assert (invoke.attributes or {})["gen_ai.provider.name"] == "anthropic"
    assert {s.parent.span_id for s in (gpt, claude) if s.parent} == {
        s.context.span_id for s in spans if s.name.startswith("invoke_agent")
    }
