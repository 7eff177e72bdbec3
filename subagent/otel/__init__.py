"""OpenTelemetry traces of a pool's whole delegation tree.

``subagent.otel.instrument(pool)`` makes, for every task of the pool, spans after the
GenAI semantic conventions: ``invoke_agent {agent}`` per task, ``chat {model}`` per
model call, ``execute_tool {tool}`` per tool call. A delegated child's
``invoke_agent`` is a child of its parent's ``execute_tool subagent`` span (a
background child's links to it), so one trace shows the tree. Every span's times are
its events' own (``Event.time``).

Needs the ``otel`` extra (``pip install 'subagent[otel]'``: ``opentelemetry-api``
only); exporting needs an SDK (``opentelemetry-sdk``) and an exporter.
"""

try:
    import opentelemetry.trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is in dev
    raise ImportError(
        "subagent.otel needs the otel extra: pip install 'subagent[otel]'"
    ) from exc

from ._environment import EnvironmentTracing as EnvironmentTracing
from ._environment import TracingSetupError as TracingSetupError
from ._environment import tracing_from_environment as tracing_from_environment
from ._instrument import Instrumentation as Instrumentation
from ._instrument import InstrumentationError as InstrumentationError
from ._instrument import OtelStatistics as OtelStatistics
from ._instrument import instrument as instrument
from ._spans import SpanLimits as SpanLimits
