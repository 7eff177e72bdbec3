"""``subagent run --otel``, run as a subprocess: spans through the OTEL_* variables."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .test_cli import write_specs

RUN = ["run", "specs.toml", "--agent", "helper", "summarise notes.txt", "--otel"]


def environment(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(values)
    return env


def subagent(
    tmp_path: Path, env: dict[str, str], *, blocked: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    # ``blocked``: modules made unimportable in the child, as if not installed.
    code = (
        "import sys\n"
        f"for name in {list(blocked)!r}: sys.modules[name] = None\n"
        "from subagent._cli._cli import main\n"
        f"sys.exit(main({[*RUN, '--ledger', str(tmp_path / 'l.jsonl')]!r}))\n"
    )
    write_specs(tmp_path, [
        {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"content": "read two lines", "usage": {"input_tokens": 7, "output_tokens": 3}},
    ])
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=120, check=False,
    )


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in ``text`` (the console exporter's output)."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    i = text.find("{")
    while i != -1:
        value, end = decoder.raw_decode(text, i)
        found.append(value)
        i = text.find("{", end)
    return found


def test_console_exporter_prints_the_spans_on_standard_error(tmp_path: Path) -> None:
    done = subagent(tmp_path, environment(OTEL_TRACES_EXPORTER="console",
                                          OTEL_SERVICE_NAME="otel-test"))
    assert done.returncode == 0, done.stderr
    first, rest = done.stderr.split("\n", 1)
    assert first == "subagent: --otel: exporting traces to console"
    spans = json_objects(rest)
    assert sorted(s["name"] for s in spans) == [
        "chat", "chat", "execute_tool read_file", "invoke_agent helper"
    ]
    by_name = {s["name"]: s for s in spans}
    root = by_name["invoke_agent helper"]
    assert root["parent_id"] is None
    assert root["attributes"] == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "helper",
        "subagent.path": "helper/0001",
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 3,
    }
    assert root["resource"]["attributes"]["service.name"] == "otel-test"
    assert {s["context"]["trace_id"] for s in spans} == {root["context"]["trace_id"]}
    assert {s["parent_id"] for s in spans if s is not root} == {root["context"]["span_id"]}
    # standard output is the command's own
    assert "output:\nread two lines\n" in done.stdout
    assert "trace_id" not in done.stdout


def test_service_name_defaults_to_subagent(tmp_path: Path) -> None:
    done = subagent(tmp_path, environment(OTEL_TRACES_EXPORTER="console"))
    assert done.returncode == 0, done.stderr
    spans = json_objects(done.stderr.split("\n", 1)[1])
    assert {s["resource"]["attributes"]["service.name"] for s in spans} == {"subagent"}


@pytest.mark.parametrize(
    ("env", "blocked", "message"),
    [
        ({}, ("opentelemetry.exporter.otlp.proto.http.trace_exporter",),
         "subagent: --otel: no OTLP exporter is installed for http/protobuf "
         "(pip install opentelemetry-exporter-otlp-proto-http), "
         "or set OTEL_TRACES_EXPORTER=console\n"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
         ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter",),
         "subagent: --otel: no OTLP exporter is installed for grpc "
         "(pip install opentelemetry-exporter-otlp-proto-grpc), "
         "or set OTEL_TRACES_EXPORTER=console\n"),
        ({"OTEL_TRACES_EXPORTER": "console"}, ("opentelemetry.sdk",),
         "subagent: --otel needs the OpenTelemetry SDK and an exporter: pip install "
         "'subagent[otel]' opentelemetry-sdk opentelemetry-exporter-otlp\n"),
        ({"OTEL_TRACES_EXPORTER": "console"}, ("opentelemetry",),
         "subagent: --otel needs the otel extra: pip install 'subagent[otel]' "
         "opentelemetry-sdk\n"),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, (),
         "subagent: --otel: unsupported OTEL_TRACES_EXPORTER value 'zipkin'; "
         "use otlp or console\n"),
        ({"OTEL_TRACES_EXPORTER": "none"}, (),
         "subagent: --otel: OTEL_TRACES_EXPORTER is none, so nothing is exported\n"),
        ({"OTEL_SDK_DISABLED": "true"}, (),
         "subagent: --otel: OTEL_SDK_DISABLED is true, so nothing is exported\n"),
    ],
)
@pytest.mark.slow
def test_no_exporter_exits_2_saying_what_to_install(
    tmp_path: Path, env: dict[str, str], blocked: tuple[str, ...], message: str
) -> None:
    done = subagent(tmp_path, environment(**env), blocked=blocked)
    assert (done.returncode, done.stderr, done.stdout) == (2, message, "")


class Receiver(http.server.BaseHTTPRequestHandler):
    """A small OTLP/HTTP trace receiver: keeps each request's spans, answers 200."""

    received: ClassVar[list[tuple[str, str, dict[str, Any]]]] = []

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        size = int(self.headers["Content-Length"])
        assert size < 1 << 20
        request = ExportTraceServiceRequest.FromString(self.rfile.read(size))
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {a.key: a.value.string_value or a.value.int_value
                                  for a in span.attributes}
                    self.received.append((self.path, span.name, attributes))
        body = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_otlp_http_exports_to_the_endpoint_of_the_environment(tmp_path: Path) -> None:
    Receiver.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        done = subagent(tmp_path, environment(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint))
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    assert done.stderr == "subagent: --otel: exporting traces to otlp\n"
    assert sorted((path, name) for path, name, _ in Receiver.received) == [
        ("/v1/traces", "chat"), ("/v1/traces", "chat"),
        ("/v1/traces", "execute_tool read_file"), ("/v1/traces", "invoke_agent helper"),
    ]
    (tool,) = [a for _, name, a in Receiver.received if name == "execute_tool read_file"]
    assert tool == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "read_file",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "subagent.path": "helper/0001",
    }
