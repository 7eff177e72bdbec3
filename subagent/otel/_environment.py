"""Tracing set up from the standard ``OTEL_*`` environment variables (``subagent run --otel``).

Needs the OpenTelemetry SDK (``opentelemetry-sdk``) and, for ``otlp``, an OTLP
exporter package; the console exporter is the SDK's own. Read here:

- ``OTEL_TRACES_EXPORTER``: ``otlp`` (the default) or ``console`` (spans as JSON on
  standard error, so that standard output stays the command's own); a list with a
  comma exports to each;
- ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``OTEL_EXPORTER_OTLP_PROTOCOL``:
  ``http/protobuf`` (the default) or ``grpc``;
- ``OTEL_SDK_DISABLED``.

The SDK and the exporters read the rest themselves (``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_EXPORTER_OTLP_ENDPOINT``, headers, timeouts,
``OTEL_BSP_*``). Spans go through a ``BatchSpanProcessor``: its worker thread does
every export, so a slow or failing collector never holds a run up.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._errors import SubagentError
from ._instrument import Instrumentation, instrument

if TYPE_CHECKING:
    from .._pool._pool import Pool

#: Seconds :meth:`EnvironmentTracing.shutdown` waits for the last spans to be exported.
SHUTDOWN_TIMEOUT = 10.0

_OTLP = {
    "http/protobuf": ("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                      "opentelemetry-exporter-otlp-proto-http"),
    "grpc": ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
             "opentelemetry-exporter-otlp-proto-grpc"),
}


class TracingSetupError(SubagentError):
    """``--otel`` cannot export: no SDK, no exporter for ``OTEL_TRACES_EXPORTER``, or
    tracing is disabled. The message says what to install or set."""


def _exporter(name: str, environ: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)
    if name == "otlp":
        protocol = (
            environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        ).strip()
        if protocol not in _OTLP:
            raise TracingSetupError(
                f"--otel: unsupported OTLP protocol {protocol[:40]!r}; use http/protobuf or grpc"
            )
        module, package = _OTLP[protocol]
        try:
            exporter_module = importlib.import_module(module)
        except ImportError:
            raise TracingSetupError(
                f"--otel: no OTLP exporter is installed for {protocol} "
                f"(pip install {package}), or set OTEL_TRACES_EXPORTER=console"
            ) from None
        return exporter_module.OTLPSpanExporter()
    raise TracingSetupError(
        f"--otel: unsupported OTEL_TRACES_EXPORTER value {name[:40]!r}; use otlp or console"
    )


class EnvironmentTracing:
    """An SDK tracer provider with the exporters the environment names.

    Attributes:
      exporters: The exporter names in use (``otlp``, ``console``).
    """

    def __init__(self, provider: Any, exporters: tuple[str, ...]) -> None:
        self._provider = provider
        self.exporters = exporters
        self._handles: list[Instrumentation] = []

    def instrument(self, pool: Pool) -> Instrumentation:
        """:func:`subagent.otel.instrument` ``pool`` with this provider. Not a checkpoint."""
        handle = instrument(pool, tracer_provider=self._provider)
        self._handles.append(handle)
        return handle

    def shutdown(self, timeout: float = SHUTDOWN_TIMEOUT) -> bool:
        """End the instrumentations, export what is left and stop the exporters, waiting
        at most ``timeout`` seconds (blocks the calling thread; call it once trio has
        returned). Returns whether everything was exported in time."""
        for handle in self._handles:
            handle.close()
        done = threading.Event()

        def stop() -> None:
            try:
                self._provider.shutdown()
            finally:
                done.set()

        # A daemon thread: an exporter stuck past the timeout does not keep the process.
        threading.Thread(target=stop, name="subagent-otel-shutdown", daemon=True).start()
        return done.wait(timeout)


def tracing_from_environment(environ: Mapping[str, str]) -> EnvironmentTracing:
    """The tracing ``OTEL_*`` variables in ``environ`` ask for. Not a checkpoint.

    Raises:
      TracingSetupError: the SDK or the exporter is not installed, the exporter or
        protocol is unknown, or ``OTEL_SDK_DISABLED`` is true or the exporter ``none``.
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        raise TracingSetupError("--otel: OTEL_SDK_DISABLED is true, so nothing is exported")
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise TracingSetupError(
            "--otel needs the OpenTelemetry SDK and an exporter: "
            "pip install 'subagent[otel]' opentelemetry-sdk opentelemetry-exporter-otlp"
        ) from None
    names = tuple(
        n.strip().lower()
        for n in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()
    )
    if not names or names == ("none",):
        raise TracingSetupError("--otel: OTEL_TRACES_EXPORTER is none, so nothing is exported")
    exporters = [_exporter(name, environ) for name in names if name != "none"]
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "subagent"}))
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return EnvironmentTracing(provider, tuple(n for n in names if n != "none"))
