"""Spans from a pool's events, after the OpenTelemetry GenAI semantic conventions.

:class:`SpanBuilder` turns each :class:`subagent.Event` into calls of the
OpenTelemetry *API* (never an exporter: exporting is the SDK processor's business):

- ``invoke_agent {agent}`` per task, from ``task_queued`` to ``task_finished`` or
  ``task_cancelled``; a delegated child's span is a child of the parent's
  ``execute_tool subagent`` span, a background child's is a child of the parent's
  ``invoke_agent`` span with a *link* to that call; a root task's parent is the
  caller's current span when it submitted;
- ``chat {model}`` per model call, from ``model_request`` to ``model_response``
  (or the ``retry``/``error`` that ended it); made when it ends, as it has no children;
- ``execute_tool {tool}`` per tool call, from ``tool_start`` to ``tool_end``.

Every time is the event's own (``Event.time``, in nanoseconds). Nothing here waits;
all of it runs on the trio thread, inside the pool's observer call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode

import agentcore
from agentcore import AgentPath
from ledger import redact

from .._delegation._tool import parse_arguments
from .._errors import InvalidArgumentsError
from .._events import Event

#: Why a task ended, for the runs that did not answer (``error.type``).
_OK_ENDS = frozenset({"stop", "max_turns", "interrupted"})
#: The longest exception type name taken from an error text as ``error.type``.
_MAX_TYPE_NAME = 128


@attrs.frozen
class SpanLimits:
    """The bounds of one instrumentation (outside text is capped before any API call).

    Attributes:
      max_open_spans: Spans (``invoke_agent`` and ``execute_tool``) open at once, and
        delegating calls remembered for their children; past it new ones are not
        started (counted in ``spans_dropped``) and their events are ignored.
      max_attribute_length: Characters of a name, id or error text in an attribute,
        span name or status description.
      max_content_length: Characters of one prompt, completion, tool argument or
        result when content capture is on (after redaction).
    """

    max_open_spans: int = attrs.field(default=10_000, validator=attrs.validators.ge(1))
    max_attribute_length: int = attrs.field(default=1_024, validator=attrs.validators.ge(1))
    max_content_length: int = attrs.field(default=16_384, validator=attrs.validators.ge(1))


@attrs.define(eq=False)
class _TaskSpans:
    # What the builder keeps of one task while it is live.
    span: Span | None
    name: str
    model: str
    provider: str
    path: str  # subagent.path, capped
    context: otel_context.Context | None = None  # the span's, parent of its own spans
    chat_start: int | None = None
    tools: dict[str, Span] = attrs.Factory(dict)
    # Delegating calls of this task: call id -> (that call's span, whether background).
    calls: dict[str, tuple[SpanContext, bool]] = attrs.Factory(dict)
    # The last completion, kept only when content is captured.
    output: str = ""


def _ns(event: Event) -> int:
    return round(event.time * 1_000_000_000)


def _error_type(text: str | None, fallback: str) -> str:
    # ``TypeName: message`` (agentcore's describe) gives the type name; else fallback.
    if text:
        head = text.split(":", 1)[0]
        if len(head) <= _MAX_TYPE_NAME and head.isidentifier():
            return head
    return fallback


def _agent_name(path: AgentPath) -> str:
    # A task's last segment is ``name/0001``.
    return path[-1].rsplit("/", 1)[0] if path else ""


class SpanBuilder:
    """The state of one instrumentation: the open spans of the live tasks.

    ``model_of(name)`` gives the model name and the provider name the agent ``name``
    is configured with (each ``""`` when unknown). Not thread-safe: call it from the
    pool's trio thread.
    """

    def __init__(
        self,
        tracer: trace.Tracer,
        model_of: Callable[[str], tuple[str, str]],
        *,
        capture_content: bool,
        limits: SpanLimits,
    ) -> None:
        self._tracer = tracer
        self._model_of = model_of
        self._content = capture_content
        self._limits = limits
        self._tasks: dict[AgentPath, _TaskSpans] = {}
        self._open = 0
        self.spans_started = 0
        self.spans_dropped = 0
        self._handlers: dict[str, Callable[[Event, _TaskSpans], None]] = {
            "model_request": self._model_request,
            "model_response": self._model_response,
            "retry": self._model_failed,
            "error": self._model_failed,
            "tool_start": self._tool_start,
            "tool_end": self._tool_end,
            "tool_skipped": self._tool_skipped,
            "agent_start": self._agent_start,
            "agent_end": self._agent_end,
        }

    @property
    def open_spans(self) -> int:
        """Spans started and not yet ended (plus remembered delegating calls)."""
        return self._open

    # -- bounds ----------------------------------------------------------------------

    def _cap(self, text: str) -> str:
        return text[: self._limits.max_attribute_length]

    def _content_text(self, text: str) -> str:
        return redact(text)[: self._limits.max_content_length]

    def _messages(self, role: str, text: str) -> str:
        parts = [{"type": "text", "content": self._content_text(text)}]
        return json.dumps([{"role": role, "parts": parts}], ensure_ascii=False)

    def _room(self) -> bool:
        if self._open >= self._limits.max_open_spans:
            self.spans_dropped += 1
            return False
        return True

    def _start(
        self,
        name: str,
        parent: otel_context.Context | None,
        start: int,
        attributes: dict[str, Any],
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        links: list[Link] | None = None,
    ) -> Span:
        span = self._tracer.start_span(
            name, parent, kind, attributes, links, start_time=start
        )
        self.spans_started += 1
        return span

    # -- events ----------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        """Turn one event into span calls. Never waits; may raise what the API raises."""
        kind = event.kind
        if kind == "task_queued":
            self._task_queued(event)
            return
        spans = self._tasks.get(event.path)
        if spans is None:
            return
        if kind == "task_finished" or kind == "task_cancelled":
            self._task_end(event, spans)
            return
        if spans.span is None:
            return
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(event, spans)

    def _task_queued(self, event: Event) -> None:
        path = event.path
        name = _agent_name(path)
        model, provider = self._model_of(name)
        model = self._cap(model)
        spans = _TaskSpans(None, name, model, provider, self._cap("/".join(path)))
        self._tasks[path] = spans
        if not self._room():
            return
        parent_ctx: otel_context.Context | None = None
        links: list[Link] | None = None
        above = self._tasks.get(path[:-1]) if len(path) > 1 else None
        if above is not None and above.span is not None:
            call = above.calls.get(event.call_id) if event.call_id is not None else None
            if call is None or call[1]:
                parent_ctx = above.context
                if call is not None:
                    links = [Link(call[0], {"subagent.link": "started_by"})]
            else:
                parent_ctx = trace.set_span_in_context(trace.NonRecordingSpan(call[0]))
        else:
            # A root task (or one whose parent is not traced): the submitter's span.
            parent_ctx = otel_context.get_current()
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self._cap(name),
            "subagent.path": spans.path,
        }
        if model:
            attributes["gen_ai.request.model"] = model
        if provider:
            attributes["gen_ai.provider.name"] = provider
        spans.span = self._start(
            self._cap(f"invoke_agent {name}"), parent_ctx, _ns(event), attributes, links=links
        )
        spans.context = trace.set_span_in_context(spans.span)
        self._open += 1

    def _task_end(self, event: Event, spans: _TaskSpans) -> None:
        del self._tasks[event.path]
        self._open -= len(spans.calls)
        span = spans.span
        if span is None:
            return
        end = _ns(event)
        for tool in spans.tools.values():
            self._fail(tool, "cancelled", None)
            tool.end(end)
            self._open -= 1
        summary = event.summary
        if summary is not None:
            usage = summary.usage
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if self._content and spans.output:
            span.set_attribute("gen_ai.output.messages", self._messages("assistant", spans.output))
        if event.kind == "task_cancelled":
            self._fail(span, "cancelled", event.error)
        elif summary is not None and str(summary.end_reason) not in _OK_ENDS:
            self._fail(span, _error_type(event.error, str(summary.end_reason)), event.error)
        elif summary is None and event.error:
            self._fail(span, _error_type(event.error, "error"), event.error)
        span.end(end)
        self._open -= 1

    def _fail(self, span: Span, error_type: str, description: str | None) -> None:
        span.set_attribute("error.type", self._cap(error_type))
        text = self._cap(redact(description)) if description else None
        span.set_status(Status(StatusCode.ERROR, text))

    def _agent_start(self, event: Event, spans: _TaskSpans) -> None:
        inner = event.event
        if self._content and inner is not None and spans.span is not None:
            spans.span.set_attribute("gen_ai.input.messages", self._messages("user", inner.text))

    def _agent_end(self, event: Event, spans: _TaskSpans) -> None:
        inner = event.event
        if spans.chat_start is not None and inner is not None and inner.summary is not None:
            self._chat(event, spans, str(inner.summary.end_reason), inner.summary.error)

    def _model_request(self, event: Event, spans: _TaskSpans) -> None:
        spans.chat_start = _ns(event)

    def _model_response(self, event: Event, spans: _TaskSpans) -> None:
        if spans.chat_start is not None:
            self._chat(event, spans, None, None)

    def _model_failed(self, event: Event, spans: _TaskSpans) -> None:
        inner = event.event
        if spans.chat_start is not None and inner is not None:
            self._chat(event, spans, _error_type(inner.text, str(event.kind)), inner.text)

    def _chat(
        self, event: Event, spans: _TaskSpans, error_type: str | None, error: str | None
    ) -> None:
        # One model call, made whole now that it ended (a chat span has no children).
        start, spans.chat_start = spans.chat_start, None
        assert start is not None and spans.span is not None
        inner = event.event
        usage = inner.usage if inner is not None else None
        model = spans.model or (self._cap(usage.model) if usage is not None else "")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "subagent.path": spans.path,
        }
        if spans.model:
            attributes["gen_ai.request.model"] = spans.model
        if spans.provider:
            attributes["gen_ai.provider.name"] = spans.provider
        if usage is not None:
            if usage.model:
                attributes["gen_ai.response.model"] = self._cap(usage.model)
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
        message = inner.message if inner is not None else None
        if message is not None and self._content:
            spans.output = message.content
            attributes["gen_ai.output.messages"] = self._messages("assistant", message.content)
        name = f"chat {model}" if model else "chat"
        span = self._start(name, spans.context, start, attributes, kind=SpanKind.CLIENT)
        if error_type is not None:
            self._fail(span, error_type, error)
        span.end(_ns(event))

    def _tool_attributes(self, spans: _TaskSpans, call: agentcore.ToolCall) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": self._cap(redact(call.name)),
            "gen_ai.tool.call.id": self._cap(redact(call.id)),
            "gen_ai.tool.type": "function",
            "subagent.path": spans.path,
        }
        if self._content:
            attributes["gen_ai.tool.call.arguments"] = self._content_text(call.arguments)
        return attributes

    def _tool_start(self, event: Event, spans: _TaskSpans) -> None:
        inner = event.event
        call = inner.call if inner is not None else None
        if call is None or spans.span is None or call.id in spans.tools or not self._room():
            return
        span = self._start(
            self._cap(f"execute_tool {redact(call.name)}"), spans.context, _ns(event),
            self._tool_attributes(spans, call),
        )
        spans.tools[call.id] = span
        self._open += 1
        if call.name == "subagent" and self._room():
            try:
                _, _, wait = parse_arguments(call.arguments)
            except InvalidArgumentsError:
                return  # no child starts from it
            spans.calls[call.id] = (span.get_span_context(), not wait)
            self._open += 1

    def _tool_end(self, event: Event, spans: _TaskSpans) -> None:
        inner = event.event
        call = inner.call if inner is not None else None
        if inner is None or call is None:
            return
        span = spans.tools.pop(call.id, None)
        if span is None:
            return
        self._open -= 1
        if self._content:
            span.set_attribute("gen_ai.tool.call.result", self._content_text(inner.text))
        if inner.is_error:
            self._fail(span, "tool_error", None)
        span.end(_ns(event))

    def _tool_skipped(self, event: Event, spans: _TaskSpans) -> None:
        # A call answered without running: a span of no length, or the end of its own.
        inner = event.event
        call = inner.call if inner is not None else None
        if call is None or spans.span is None:
            return
        span = spans.tools.pop(call.id, None)
        if span is not None:
            self._open -= 1
        else:
            span = self._start(
                self._cap(f"execute_tool {redact(call.name)}"), spans.context, _ns(event),
                self._tool_attributes(spans, call),
            )
        self._fail(span, "skipped", None)
        span.end(_ns(event))

    def close(self, end: int) -> None:
        """End every span still open at ``end`` (ns), marked ``error.type`` ``unfinished``."""
        tasks, self._tasks = self._tasks, {}
        for spans in tasks.values():
            if spans.span is None:
                continue
            for tool in spans.tools.values():
                self._fail(tool, "unfinished", None)
                tool.end(end)
            self._fail(spans.span, "unfinished", None)
            spans.span.end(end)
        self._open = 0
