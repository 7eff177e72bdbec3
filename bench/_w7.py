"""W7, real HTTP: every model call goes over a socket to :mod:`bench._llmserver`.

Each run makes two streamed chat-completions calls (the first answers with a call of
the ``echo`` tool, the second with the answer in ``ANSWER_CHUNKS`` chunks) and one
tool call. Ours runs through :class:`agentcore.models.OpenAIChatModel` on one shared
``httpx.AsyncClient`` (its pool limited to the concurrency), every event to one
consumer through a ``Stream(64)``, audited to a :class:`ledger.JsonlSink`; the peers
(``bench/w7_peers.py``) through their own OpenAI clients against the same server.

:class:`Server` starts and stops the server process; :func:`w7_pool` returns the body
of one repetition for :func:`bench._timing.once`.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import attrs
import httpx
import trio

import subagent
from agentcore.models import OpenAIChatModel
from ledger import JsonlSink

from . import _llmserver
from ._timing import Body, once
from ._workloads import ECHO, Counter

ANSWER_TEXT = _llmserver.ANSWER_TEXT

#: Audit entries a W7 run records (as W1's: the same two model calls and one tool call).
W7_ENTRIES = 10


class Server:
    """The model server in a subprocess: ``with Server() as server:`` starts it on
    ``ports`` ephemeral ports of 127.0.0.1 and stops it at the end.

    Args:
      ports: How many ports to listen on (each takes ~28,000 client connections).
      fds: The open-file limit the server should raise itself to, if any.
    """

    def __init__(self, ports: int = 1, fds: int | None = None) -> None:
        argv = [sys.executable, "-m", "bench._llmserver", "--ports", str(ports)]
        if fds is not None:
            argv += ["--fds", str(fds)]
        self._argv = argv
        self._process: subprocess.Popen[str] | None = None
        self.ports: list[int] = []

    def __enter__(self) -> Server:
        root = Path(__file__).resolve().parent.parent
        self._process = subprocess.Popen(
            self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline().split()
        if not line or line[0] != "ports":
            self.__exit__(None, None, None)
            raise RuntimeError("the model server did not start")
        self.ports = [int(p) for p in line[1:]]
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()

    def base_url(self, index: int = 0) -> str:
        """The API's base URL on the ``index``-th port."""
        return f"http://127.0.0.1:{self.ports[index]}/v1"

    def _call(self, method: str, path: str) -> dict[str, object]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.ports[0]}{path}", method=method,
            data=b"" if method == "POST" else None,
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            result: dict[str, object] = json.loads(reply.read())
        return result

    def stats(self) -> dict[str, object]:
        """The server's counters (requests, replies of each kind, CPU seconds)."""
        return self._call("GET", "/stats")

    def reset(self) -> None:
        """Zero the server's counters."""
        self._call("POST", "/reset")


def w7_pool(
    runs: int, concurrency: int, base_url: str, ledger_file: Callable[[], str],
) -> Body:
    """W7 on the pool: ``runs`` runs, ``concurrency`` at once, against ``base_url``,
    audited to a new JSONL file from ``ledger_file``. The body returns the run count;
    :data:`last_events` holds the events the consumer took in the last repetition."""

    async def main() -> int:
        stream: subagent.Stream = subagent.Stream(64)
        counter = Counter()
        sink = JsonlSink(ledger_file())
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(limits=limits) as client:
            model = OpenAIChatModel("bench", api_key="bench", base_url=base_url, client=client)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(counter.consume, stream)
                async with subagent.open_pool(
                    max_concurrent=concurrency, max_queued=runs, events=stream,
                    defaults=subagent.Defaults(model=model, audit=sink),
                ) as pool:
                    pool.register(subagent.Spec("worker", tools=(ECHO,)))
                    handles = [await pool.submit("worker", f"task {i}") for i in range(runs)]
                stats = pool.statistics()
                assert stats.finished == runs, stats
                stream.close()
        await sink.aclose()
        assert sink.statistics().recorded == runs * W7_ENTRIES, sink.statistics()
        for handle in handles[:1]:
            assert (await handle.wait()).output == ANSWER_TEXT
        last_events[0] = counter.seen
        return runs

    return main


#: The events the consumer of the last :func:`w7_pool` repetition took.
last_events = [0]


# -- the comparison ------------------------------------------------------------------

PEERS = ("openai-agents", "pydantic-ai")
"""The peers of ``bench/w7_peers.py``, by the name its command line takes."""

PEER_MODULES = {"openai-agents": "agents", "pydantic-ai": "pydantic_ai"}


@attrs.frozen
class Figure:
    """One contender's repetition of W7."""

    us_per_run: float
    events_per_second: float
    server_us_per_request: float
    """The server process's CPU time over the requests it answered."""


def _ours(server: Server, runs: int, concurrency: int, ledger_file: Callable[[], str]) -> Figure:
    once(w7_pool(min(runs, concurrency), concurrency, server.base_url(), ledger_file))
    server.reset()
    measure = once(w7_pool(runs, concurrency, server.base_url(), ledger_file))
    return _figure(server, measure.seconds, runs, last_events[0], expected=runs * 2)


def _peer(python: str, peer: str, server: Server, runs: int, concurrency: int) -> Figure:
    server.reset()
    out = subprocess.run(
        [python, str(Path(__file__).with_name("w7_peers.py")), peer, server.base_url(),
         str(runs), str(concurrency)],
        capture_output=True, text=True, timeout=_TIMEOUT, check=False,
    )
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"w7_peers.py {peer} failed: {tail}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    seconds = float(result["us_per_run"]) * runs / 1e6
    warm = min(runs, concurrency)
    return _figure(server, seconds, runs, int(result["events"]), expected=(runs + warm) * 2)


def _figure(server: Server, seconds: float, runs: int, events: int, *, expected: int) -> Figure:
    stats = server.stats()
    requests = int(stats["requests"])  # type: ignore[call-overload]
    # Every run made its two streamed calls, and nothing else reached the server.
    assert requests == expected and stats["unstreamed"] == 0, stats
    cpu = float(stats["cpu_seconds"])  # type: ignore[arg-type]
    return Figure(seconds / runs * 1e6, events / seconds, cpu / requests * 1e6)


_TIMEOUT = 900.0


def peers_available(python: str | None) -> tuple[list[str], str]:
    """The W7 peers importable by ``python``, and a sentence on those that are not."""
    if python is None:
        return [], "no peers' python"
    found: list[str] = []
    missing: list[str] = []
    for peer in PEERS:
        check = [python, "-c", f"import {PEER_MODULES[peer]}, openai"]
        ok = subprocess.run(check, capture_output=True, timeout=120, check=False).returncode == 0
        (found if ok else missing).append(peer)
    return found, (f"not installed in {python}: {', '.join(missing)}" if missing else "")


def report(
    runs: int, concurrencies: tuple[int, ...], *, repeat: int, python: str | None,
    peers: list[str], print_: Callable[[str], None],
) -> dict[tuple[str, int], list[Figure]]:
    """Run W7 on ours and ``peers`` at each concurrency, ``repeat`` interleaved rounds
    (each round runs every contender once, ours first in even rounds and last in odd
    ones), against one server; print the medians. Returns every figure."""
    names = ["ours (OpenAIChatModel, JsonlSink)", *peers]
    figures: dict[tuple[str, int], list[Figure]] = {
        (name, c): [] for name in names for c in concurrencies
    }
    with Server() as server, tempfile.TemporaryDirectory() as directory:
        files = itertools.count()

        def ledger_file() -> str:
            return os.path.join(directory, f"w7-{next(files)}.jsonl")

        for turn in range(repeat):
            for c in concurrencies:
                order = names if turn % 2 == 0 else names[::-1]
                for name in order:
                    if name == names[0]:
                        figure = _ours(server, runs, c, ledger_file)
                    else:
                        assert python is not None
                        figure = _peer(python, name, server, runs, c)
                    figures[name, c].append(figure)
    for c in concurrencies:
        print_(f"W7 real HTTP, {runs} runs, {c} at once (median of {repeat}, interleaved;"
               " server CPU per request):")
        for name in names:
            got = figures[name, c]
            us = statistics.median(f.us_per_run for f in got)
            print_(f"  {name}: {us:,.0f} us/run "
                   f"({min(f.us_per_run for f in got):,.0f}-{max(f.us_per_run for f in got):,.0f}),"
                   f" {statistics.median(f.events_per_second for f in got):,.0f} events/s,"
                   f" server {statistics.median(f.server_us_per_request for f in got):,.0f}"
                   " us/request")
        if peers:
            ours = statistics.median(f.us_per_run for f in figures[names[0], c])
            fastest = min(peers, key=lambda p: statistics.median(
                f.us_per_run for f in figures[p, c]))
            theirs = statistics.median(f.us_per_run for f in figures[fastest, c])
            print_(f"  ours vs fastest peer, {fastest}: {theirs / ours:.1f}x faster"
                   " (target >= 3x)")
    return figures
