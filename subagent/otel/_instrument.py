"""``instrument(pool)``: OpenTelemetry spans for every task of a pool, with no change to
the code that uses the pool."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import attrs
from opentelemetry import trace

from .._errors import SubagentError
from .._events import Event
from ._spans import SpanBuilder, SpanLimits

if TYPE_CHECKING:
    from .._pool._pool import Pool

#: The instrumentation scope name of the spans.
TRACER_NAME = "subagent"

#: ``gen_ai.provider.name`` of agentcore's adapters, by class name (wrapped models,
#: such as a rate limiter's, name none).
_PROVIDERS = {"AnthropicChatModel": "anthropic", "OpenAIChatModel": "openai"}


class InstrumentationError(SubagentError):
    """The pool already has an observer (it is instrumented already)."""


@attrs.frozen
class OtelStatistics:
    """A snapshot of an :class:`Instrumentation`."""

    spans_started: int
    """Spans started (``invoke_agent``, ``chat``, ``execute_tool``)."""
    spans_dropped: int
    """Spans not started because ``max_open_spans`` were open."""
    open_spans: int
    """Spans open now, plus the delegating calls remembered for their children."""
    observer_errors: int
    """Events whose handling raised (the error was swallowed; the pool went on)."""
    closed: bool
    """Whether :meth:`Instrumentation.close` was called."""


class Instrumentation:
    """The handle :func:`instrument` returns: statistics, and :meth:`close`.

    Also a context manager that closes on exit.
    """

    def __init__(self, pool: Pool, builder: SpanBuilder) -> None:
        self._pool = pool
        self._builder = builder
        self._errors = 0
        self._closed = False

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<subagent.otel.Instrumentation open_spans={self._builder.open_spans}{state}>"

    def _observe(self, event: Event) -> None:
        # The pool's observer: a failure of the API (or of this code) is counted, never
        # raised into the run that emitted the event.
        try:
            self._builder.observe(event)
        except Exception:
            self._errors += 1

    def statistics(self) -> OtelStatistics:
        """The counts so far; not a checkpoint."""
        builder = self._builder
        return OtelStatistics(
            builder.spans_started, builder.spans_dropped, builder.open_spans,
            self._errors, self._closed,
        )

    def close(self) -> None:
        """Stop observing the pool and end the spans still open, now (``error.type``
        ``unfinished``). Sync and idempotent; not a checkpoint."""
        if self._closed:
            return
        self._closed = True
        if self._pool._observer == self._observe:
            self._pool._observer = None
        try:
            self._builder.close(time.time_ns())
        except Exception:
            self._errors += 1

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def instrument(
    pool: Pool,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    capture_content: bool = False,
    limits: SpanLimits | None = None,
) -> Instrumentation:
    """Trace every task of ``pool`` from now on as OpenTelemetry spans. Not a checkpoint.

    Spans follow the GenAI semantic conventions (see :mod:`subagent.otel`); a root
    task's ``invoke_agent`` span is a child of the span current where it was
    submitted. Only the OpenTelemetry API is called, on the trio thread: export with
    a ``BatchSpanProcessor`` so that a slow or failing exporter never holds a run up.

    Args:
      pool: The pool to observe (its tasks already running are not traced).
      tracer_provider: Where the spans go; by default the global provider.
      capture_content: Record prompts, completions, tool arguments and results
        (``gen_ai.input.messages``, ``gen_ai.output.messages``,
        ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``), each redacted
        by :func:`ledger.redact` and capped. Off by default.
      limits: The bounds (:class:`SpanLimits`); defaults otherwise.

    Raises:
      InstrumentationError: ``pool`` already has an observer.
    """
    if pool._observer is not None:
        raise InstrumentationError("the pool is instrumented already")
    tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
    specs = pool._specs

    def model_of(name: str) -> tuple[str, str]:
        spec = specs.get(name)
        if spec is None:
            return "", ""
        model = getattr(spec.model, "model", None)
        provider = _PROVIDERS.get(type(spec.model).__name__, "")
        return (model if isinstance(model, str) else "", provider)

    builder = SpanBuilder(
        tracer, model_of, capture_content=capture_content, limits=limits or SpanLimits()
    )
    handle = Instrumentation(pool, builder)
    pool._observer = handle._observe
    return handle
