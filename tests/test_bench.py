"""The benchmark runner keeps working: ``python -m bench --quick`` runs every workload,
and ``--peers`` says so when no peer library can run.

Benchmarks are not tests: nothing here looks at a time, a rate or a ratio.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_quick_bench_runs_every_workload() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for prefix in ("W1 fan-out", "W1 by audit sink", "W1-typed fan-out", "W2 stream",
                   "W3 cancel latency",
                   "W4 memory", "W5 nesting", "W6 parked runs"):
        assert sum(line.startswith(prefix) for line in lines) == 1, (prefix, out.stdout)
    # W6 (parked-run memory) is one of them: its line names its cases.
    [line] = [line for line in lines if line.startswith("W6 parked runs")]
    for case in ("pool", "pool-stream-sink", "bare"):
        assert f" {case} " in line, line


def _peers(python: str, scripts: Path) -> subprocess.CompletedProcess[str]:
    # The peers' scripts live in ../shared/peers, which a clone need not have beside
    # it: stand-ins with their names get the runner past that check to the python's.
    for name in ("openai_agents_peer.py", "pydantic_ai_peer.py"):
        (scripts / name).write_text("raise SystemExit('a stand-in: never run')\n")
    return subprocess.run(
        [sys.executable, "-m", "bench", "--peers", "--quick", "--repeat", "1",
         "--peers-python", python, "--peers-dir", str(scripts)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != "BENCH_PEERS_PYTHON"},
    )


@pytest.mark.slow
def test_peers_without_a_peers_python_says_so_and_exits_0(tmp_path: Path) -> None:
    out = _peers("/nonexistent/peers-venv/bin/python", tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "peers: cannot run the peers' python '/nonexistent/peers-venv/bin/python'" in out.stdout
    assert "peers: none available; only our own figures follow" in lines
    assert any(line.startswith("  ours, audit on (MemorySink): ") for line in lines), out.stdout
    assert not any("fastest peer" in line for line in lines), out.stdout


@pytest.mark.slow
def test_peers_not_installed_says_which_and_exits_0(tmp_path: Path) -> None:
    # This venv runs the bench but has neither peer library installed.
    if importlib.util.find_spec("agents") or importlib.util.find_spec("pydantic_ai"):
        pytest.skip("a peer library is installed in the test venv")
    out = _peers(sys.executable, tmp_path)
    assert out.returncode == 0, out.stderr
    assert (
        f"peers: not installed in {sys.executable}: OpenAI Agents SDK (Runner.run + hooks)"
        " (module 'agents'), pydantic-ai (Agent.run) (module 'pydantic_ai')"
    ) in out.stdout.splitlines()
    assert "peers: none available; only our own figures follow" in out.stdout.splitlines()


@pytest.mark.slow
def test_audit_cost_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench.audit_cost", "--repeat", "1", "--runs", "20"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    names = [line.split(" wall ")[0].strip() for line in out.stdout.splitlines()[1:]]
    assert names == [
        "per entry, the ten entries of each of the W1 runs:",
        "MemorySink x1", "MemorySink x1, entries read", "JsonlSink x1", "JsonlSink x8",
        "W1, 20 runs:", "no sink", "a sink that records nothing", "MemorySink",
    ]


@pytest.mark.slow
def test_sink_cost_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench.sink_cost", "--repeat", "1", "--runs", "20"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    names = [line.split(" wall ")[0].strip() for line in out.stdout.splitlines()[1:]]
    assert names == [
        "no audit", "JsonlSink, record_nowait", "JsonlSink, awaited record()", "SqliteSink"
    ]


@pytest.mark.slow
def test_quick_bench_runs_w1_traced() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "w1otel"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("W1 traced")]
    assert "traced (subagent.otel, SDK, batch processor)" in line


@pytest.mark.slow
def test_temporal_bench_runs() -> None:
    pytest.importorskip("temporalio", reason="the 'temporal' extra is not installed")
    out = subprocess.run(
        [sys.executable, "-m", "bench.temporal", "--runs", "2", "--concurrent", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    names = [line[:36].strip() for line in out.stdout.splitlines()]
    assert names == [
        "W1 root, median of 2 runs (wall ms):", "in-process (fresh pool per run)",
        "on Temporal, one at a time", "on Temporal, 2 at once, per run",
    ]


def test_w1_typed_records_one_more_entry_per_run() -> None:
    import trio

    from bench._workloads import W1_ENTRIES, W1_TYPED_ENTRIES, w1_typed_pool

    assert W1_TYPED_ENTRIES == W1_ENTRIES + 1
    assert trio.run(w1_typed_pool(5, read=True)) == 5


@pytest.mark.slow
def test_parked_memory_workload_runs() -> None:
    # ``--quick`` runs W6 with the others (test_quick_bench_runs_every_workload checks
    # its line); here its measure traced.
    traced = subprocess.run(
        [sys.executable, "-m", "bench._parked", "pool", "20", "--trace"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert traced.returncode == 0, traced.stderr
    result = json.loads(traced.stdout)
    assert sorted(result) == [
        "case", "rss_bytes_per_run", "rss_bytes_total", "runs", "top", "traced_bytes_per_run",
    ]
    assert (result["case"], result["runs"], len(result["top"])) == ("pool", 20, 12)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "connections", "http2_connections"),
    [("http-bare", 30, 0), ("http-pool", 30, 0), ("http2-bare", 1, 1), ("http2-pool", 1, 1)],
)
def test_parked_over_http_runs(case: str, connections: int, http2_connections: int) -> None:
    # It returns only once the server holds every request parked in its stream; over
    # HTTP/2 the 30 streams share one connection.
    out = subprocess.run(
        [sys.executable, "-m", "bench._parked", case, "30"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert sorted(result) == [
        "case", "connections", "fd_limit", "http2_connections", "rss_bytes_per_run",
        "rss_bytes_total", "runs", "seconds", "server_ports",
    ]
    assert (result["case"], result["runs"], result["server_ports"]) == (case, 30, 1)
    assert (result["connections"], result["http2_connections"]) == (
        connections, http2_connections)


def test_the_server_answers_openai_calls_over_http2() -> None:
    # h2c with prior knowledge: a caller-owned httpx client with HTTP/2 only, given to
    # OpenAIChatModel, streams its reply on the server's HTTP/2 side.
    import httpx
    import trio

    from agentcore import Message, ModelRequest
    from agentcore.models import OpenAIChatModel
    from bench import _w7

    async def ignore(delta: str) -> None:
        pass

    async def main(url: str) -> list[str]:
        async with httpx.AsyncClient(http1=False, http2=True) as client:
            model = OpenAIChatModel("bench", api_key="bench", base_url=url, client=client)
            request = ModelRequest((Message("user", "x"),))
            streamed = await model.stream(request, ignore)
            answered = await model.complete(request)
        return [call.name for reply in (streamed, answered) for call in reply.message.tool_calls]

    with _w7.Server() as server:
        calls = trio.run(main, server.base_url())
        stats = server.stats()
    assert calls == ["echo", "echo"]
    assert {k: stats[k] for k in ("requests", "unstreamed", "http2_connections")} == {
        "requests": 2, "unstreamed": 1, "http2_connections": 1,
    }


def test_audit_parts_runs_and_its_store_is_memory_sinks() -> None:
    from bench.audit_parts import _store
    from ledger import MemorySink

    out = subprocess.run(
        [sys.executable, "-m", "bench.audit_parts", "--repeat", "1", "--runs", "20"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    names = [line.split(" us/run")[0].rsplit(maxsplit=1)[0].strip()
             for line in out.stdout.splitlines()[1:]]
    assert names == ["memory", "data check", "store", "append", "nothing", "off"]
    # The "store" case keeps what MemorySink keeps (bar the time of each entry).
    fields: tuple[Any, ...] = (
        "run_end", "r", ("w",), "a", None, "c", None, None, None, "ok", None, 0.5,
        {"turns": 2, "end_reason": "stop"},
    )
    real, stored = MemorySink(), MemorySink()
    real.record_fields_nowait(*fields)
    _store(stored, *fields)
    assert real._pending[:13] == stored._pending[:13]  # the time of each entry aside
    assert len(real._pending) == len(stored._pending)
    assert [e.data for e in real.entries] == [e.data for e in stored.entries]


@pytest.mark.slow
def test_fixed_w1_counts_the_same_bytecodes_every_time() -> None:
    # bench.cg_w1.run_fixed runs W1 the same way each time (seeded scheduler, a clock
    # that never moves): two processes count the same bytecodes, case by case.
    outputs = [
        subprocess.run(
            [sys.executable, "-m", "bench.opcodes", "--runs", "3", "--top", "3"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )
        for _ in range(2)
    ]
    for out in outputs:
        assert out.returncode == 0, out.stderr
    first, second = (out.stdout.splitlines() for out in outputs)
    assert first == second
    assert [line.split()[0] for line in first[1:4]] == ["off", "nothing", "on"]
    assert len(first) == 8


def test_our_contenders_take_turns_at_going_first_after_a_warm_up() -> None:
    # --peers starts each repetition of ours with an untimed warm-up, then rotates
    # them: none always runs first after the peers' subprocesses (whose runs leave
    # the caches cold for the next one).
    from bench._peers import WARM_UP, _rotated
    from bench._timing import Measure

    def case(name: str) -> Any:
        return lambda: Measure(1.0, 1)

    cases = {name: case(name) for name in ("on", "read", "off", "bare")}
    warm = case(WARM_UP)
    turns = [_rotated(cases, turn, warm) for turn in range(5)]
    assert all(turn[0] == (WARM_UP, warm) for turn in turns)
    assert [[name for name, _ in turn[1:]] for turn in turns] == [
        ["on", "read", "off", "bare"],
        ["read", "off", "bare", "on"],
        ["off", "bare", "on", "read"],
        ["bare", "on", "read", "off"],
        ["on", "read", "off", "bare"],
    ]


def _ledger_files(directory: Path) -> Any:
    names = (str(directory / f"w7-{k}.jsonl") for k in range(1_000_000))
    return lambda: next(names)


def test_w7_runs_go_over_http_to_the_server_two_streamed_calls_each(tmp_path: Path) -> None:
    import trio

    from bench import _w7

    with _w7.Server() as server:
        ran = trio.run(_w7.w7_pool(2, 2, server.base_url(), _ledger_files(tmp_path)))
        stats = server.stats()
    assert ran == 2
    assert {k: v for k, v in stats.items() if k not in ("cpu_seconds", "connections")} == {
        "requests": 4, "tool_call_replies": 2, "answer_replies": 2, "unstreamed": 0,
        "parked": 0, "http2_connections": 0,
    }
    # Per run: queued, started, 50 text deltas and the rest of the run's events.
    assert _w7.last_events[0] == 2 * 64
    ledgers = sorted(tmp_path.glob("w7-*.jsonl"))
    assert len(ledgers) == 1
    assert len(ledgers[0].read_text().splitlines()) == 2 * _w7.W7_ENTRIES


def test_w7_keeps_its_connection_alive_from_one_call_to_the_next(tmp_path: Path) -> None:
    # A streamed reply read to its end marker must hand its connection back to the
    # client's pool: one run, two calls, one connection (and one more for the stats).
    import trio

    from bench import _w7

    with _w7.Server() as server:
        trio.run(_w7.w7_pool(1, 1, server.base_url(), _ledger_files(tmp_path)))
        stats = server.stats()
    assert (stats["requests"], stats["connections"]) == (2, 2)


def test_w1_from_asyncio_runs_the_same_workload() -> None:
    from bench.aio_w1 import w1_asyncio

    # Its own checks: every run finished, W1_ENTRIES audited each, the events read.
    assert w1_asyncio(20) == 20


@pytest.mark.slow
def test_aio_w1_reports_the_ratio() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench.aio_w1", "--repeat", "1", "--runs", "20"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("W1, 20 runs, best of 1 interleaved: from trio ")
    assert "from asyncio (subagent.aio, guest mode)" in out.stdout


def test_sink_designs_record_every_w1_entry() -> None:
    # Each prototype of bench.sink_designs that writes takes W1's ten entries a run:
    # the awaited JSONL one, the tick one, the inline SQLite one and the intent-log
    # ones (moved into the database by the close) as sound ledgers, the floors as
    # lines and rows, the lines table as its lines.
    import sqlite3

    import trio

    from bench.audit_cost import w1_body
    from bench.sink_designs import DESIGNS
    from ledger import verify

    assert set(DESIGNS) - {"parked"} == {
        "jsonl-awaited", "sqlite-inline", "jsonl-floor", "sqlite-floor", "jsonl-floor-tick",
        "jsonl-tick", "sqlite-log", "sqlite-log-sql", "sqlite-log-lines",
    }
    for name, make in DESIGNS.items():
        if name == "parked":
            continue
        made: list[Any] = []

        def record_to(make: Any = make, made: list[Any] = made) -> Any:
            made.append(make())
            return made[-1]

        trio.run(w1_body(7, record_to))
        (sink,) = made
        trio.run(sink.aclose)  # the pool leaves its audit sink open (it is the caller's)
        if name.startswith("jsonl"):
            with open(sink.path, "rb") as file:
                assert sum(1 for _ in file) == 70, name
        else:
            table = "lines" if name == "sqlite-log-lines" else "entries"
            with sqlite3.connect(sink.path) as conn:
                assert conn.execute(f"SELECT count(*), max(seq) FROM {table}").fetchone() == (
                    70, 70), name
            conn.close()
        if "floor" not in name and name != "sqlite-log-lines":
            report = verify(sink.path)
            assert (report.ok, report.entries) == (True, 70), name


@pytest.mark.slow
def test_sink_designs_wall_reports_every_case() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench.sink_designs", "wall", "20", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    names = [line.split(" wall ")[0].strip() for line in out.stdout.splitlines()[1:]]
    assert names == [
        "off", "jsonl", "sqlite", "nothing", "jsonl-awaited", "sqlite-inline",
        "jsonl-floor", "sqlite-floor", "jsonl-floor-tick", "jsonl-tick", "parked",
        "sqlite-log", "sqlite-log-sql", "sqlite-log-lines",
    ]
