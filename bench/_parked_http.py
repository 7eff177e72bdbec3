"""W7-parked: runs parked in a model call over real HTTP connections (issue 35).

The HTTP cases of ``bench._parked`` (``http-bare`` and ``http-pool``): ``RUNS``
streamed chat-completions requests to :mod:`bench._llmserver`'s ``park`` model, whose
reply sends its headers and a first chunk and then nothing more, so every request
holds its connection open in the middle of a stream.

- ``http-bare``: the connections alone, the baseline: ``RUNS`` bare trio tasks, each
  with one streamed request (``client.send(..., stream=True)``), its first chunk read,
  waiting for the next;
- ``http-pool``: ``RUNS`` pool runs parked in :class:`agentcore.models.OpenAIChatModel`
  calls (no stream, no audit sink, a default ``Spec``).

Both spread the requests over httpx clients of :data:`SHARD` connections each, their
pool limits set to that (httpcore's pool scans its connections on every request, so
one client of 100,000 connections takes minutes to fill), and over server ports of
:data:`PORT_CONNECTIONS` connections each (a client address has ~28,000 ephemeral
ports towards one server port). Both processes raise their open-file limit to fit.
"""

from __future__ import annotations

import math
import time
from typing import Protocol

import httpx
import trio

import subagent
from agentcore.models import OpenAIChatModel

from . import _llmserver
from ._w7 import Server
from ._workloads import ECHO

SHARD = 500
"""Connections per httpx client (its ``max_connections``)."""

PORT_CONNECTIONS = 20_000
"""Client connections per server port."""

_FD_MARGIN = 1000


class Meter(Protocol):
    """``bench._parked``'s readings around the parking."""

    def start(self) -> None: ...

    def stop(self, runs: int) -> None: ...


_PARK_BODY = {
    "model": "park", "stream": True, "messages": [{"role": "user", "content": "x"}],
}
_WARM_BODY = {**_PARK_BODY, "model": "bench"}


def _park_timeout(runs: int) -> float:
    return max(300.0, runs / 20)


def _limits() -> httpx.Limits:
    return httpx.Limits(max_connections=SHARD, max_keepalive_connections=SHARD)


async def _wait_parked(server: Server, runs: int) -> None:
    # Real sockets: wait_all_tasks_blocked cannot tell a parked stream from a connect
    # in flight, so ask the server how many streams it holds (the caller bounds it).
    while True:
        stats = await trio.to_thread.run_sync(server.stats)
        if int(stats["parked"]) >= runs:  # type: ignore[call-overload]
            break
        await trio.sleep(0.2)
    await trio.sleep(1.0)  # the last first chunks reach their readers


async def _bare_one(client: httpx.AsyncClient, url: str) -> None:
    # httpx's leanest way to hold a streamed reply (``send(stream=True)``, not the
    # generator-based ``client.stream``), as OpenAIChatModel holds one: the baseline
    # keeps only what a connection itself costs.
    response = await client.send(client.build_request("POST", url, json=_PARK_BODY),
                                 stream=True)
    try:
        async for _ in response.aiter_bytes():
            await trio.sleep_forever()
    finally:
        await response.aclose()


async def park(case: str, runs: int, meter: Meter, server: Server) -> None:
    """Park ``runs`` requests of ``case`` against ``server``, reading ``meter``
    before the first and once all are parked."""
    shards = math.ceil(runs / SHARD)
    clients = [httpx.AsyncClient(limits=_limits(), timeout=None) for _ in range(shards)]
    urls = [server.base_url(k * SHARD // PORT_CONNECTIONS) for k in range(shards)]
    try:
        if case == "http-bare":
            await _park_bare(runs, meter, server, clients, urls)
        else:
            await _park_pool(runs, meter, server, clients, urls)
    finally:
        with trio.CancelScope(shield=True):
            for client in clients:
                await client.aclose()


async def _park_bare(
    runs: int, meter: Meter, server: Server, clients: list[httpx.AsyncClient],
    urls: list[str],
) -> None:
    # One whole request first, so that what the first call imports is not counted.
    async with clients[0].stream("POST", urls[0] + "/chat/completions", json=_WARM_BODY) as r:
        await r.aread()
    async with trio.open_nursery() as nursery:
        meter.start()
        for i in range(runs):
            k = i // SHARD
            nursery.start_soon(_bare_one, clients[k], urls[k] + "/chat/completions")
        with trio.fail_after(_park_timeout(runs)):
            await _wait_parked(server, runs)
        meter.stop(runs)
        nursery.cancel_scope.cancel()


async def _park_pool(
    runs: int, meter: Meter, server: Server, clients: list[httpx.AsyncClient],
    urls: list[str],
) -> None:
    async with subagent.open_pool(max_concurrent=runs, max_queued=runs) as pool:
        for k, (client, url) in enumerate(zip(clients, urls, strict=True)):
            model = OpenAIChatModel("park", api_key="bench", base_url=url, client=client)
            pool.register(subagent.Spec(f"parked{k}", model=model))
        # One whole run first, so that what the first run imports is not counted.
        warm = OpenAIChatModel("bench", api_key="bench", base_url=urls[0], client=clients[0])
        pool.register(subagent.Spec("warm", model=warm, tools=(ECHO,)))
        await (await pool.submit("warm", "warm up")).wait()
        meter.start()
        for i in range(runs):
            await pool.submit(f"parked{i // SHARD}", f"task {i}")
        with trio.fail_after(_park_timeout(runs)):
            await _wait_parked(server, runs)
        assert pool.statistics().running == runs
        meter.stop(runs)
        pool.cancel()


class TooFewFiles(Exception):
    """The open-file limit cannot be raised far enough for one socket per run."""


def measure(case: str, runs: int, meter: Meter) -> dict[str, object]:
    """Start a server sized for ``runs``, raise this process's open-file limit, park
    ``runs`` requests of ``case``; the limits used and the seconds parking took.

    Raises:
      TooFewFiles: the limit cannot be raised to ``runs`` sockets and a margin (the
        server, in its own process, needs as many).
    """
    fds = _llmserver.raise_fd_limit(runs + _FD_MARGIN)
    if fds < runs + _FD_MARGIN:
        raise TooFewFiles(
            f"{runs:,} connections need {runs + _FD_MARGIN:,} open files in each of the"
            f" two processes; the limit could be raised only to {fds:,} (the hard limit;"
            " raising it needs CAP_SYS_RESOURCE)"
        )
    ports = math.ceil(runs / PORT_CONNECTIONS)
    with Server(ports=ports, fds=runs + _FD_MARGIN) as server:
        start = time.perf_counter()
        trio.run(park, case, runs, meter, server)
        seconds = time.perf_counter() - start
    return {"fd_limit": fds, "server_ports": ports, "seconds": round(seconds, 1)}
