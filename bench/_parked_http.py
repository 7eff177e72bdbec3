"""W7-parked: runs parked in a model call over real HTTP connections (issue 35).

The HTTP cases of ``bench._parked`` (``http-bare``, ``http-pool``, and the same over
HTTP/2, ``http2-bare`` and ``http2-pool``): ``RUNS`` streamed chat-completions requests
to :mod:`bench._llmserver`'s ``park`` model, whose reply sends its headers and a first
chunk and then nothing more, so every request holds its stream open.

- ``http-bare``: the connections alone, the baseline: ``RUNS`` bare trio tasks, each
  with one streamed request (``client.send(..., stream=True)``), its first chunk read,
  waiting for the next;
- ``http-pool``: ``RUNS`` pool runs parked in :class:`agentcore.models.OpenAIChatModel`
  calls (no stream, no audit sink, a default ``Spec``).

Over HTTP/1.1 each request holds a connection of its own: the requests are spread over
httpx clients of :data:`SHARD` connections each, their pool limits set to that
(httpcore's pool scans its connections on every request, so one client of 100,000
connections takes minutes to fill). Over HTTP/2 (h2c with prior knowledge, the ``h2``
package) :data:`STREAMS` requests share a connection, each client limited to one
connection (``max_connections=1``): httpcore's pool hands every request to its first
HTTP/2 connection whatever that connection's streams (encode/httpcore#1088), so one
client would put every request on one connection, all but 100 waiting for a stream. The
connections are spread over server ports of :data:`PORT_CONNECTIONS` each (a client
address has ~28,000 ephemeral ports towards one server port). Both processes raise
their open-file limit to fit.
"""

from __future__ import annotations

import math
import time
from typing import Protocol

import httpx
import trio
import trio.testing

import subagent
from agentcore.models import OpenAIChatModel

from . import _llmserver
from ._w7 import Server
from ._workloads import ECHO

SHARD = 500
"""Connections per httpx client (its ``max_connections``)."""

STREAMS = 100
"""Requests per HTTP/2 connection: httpcore's cap on a connection's concurrent streams
(the least of the server's ``MAX_CONCURRENT_STREAMS`` and its own 100), the server's
(``h2``'s default) too."""

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


def _per_client(case: str) -> int:
    """Requests per httpx client."""
    return STREAMS if case.startswith("http2") else SHARD


def _connections(case: str, runs: int) -> int:
    return math.ceil(runs / STREAMS) if case.startswith("http2") else runs


def _client(case: str) -> httpx.AsyncClient:
    if case.startswith("http2"):
        # No keep-alive expiry: the warm-up's connection, idle until the parked requests
        # come, would otherwise be closed and opened again under load.
        return httpx.AsyncClient(
            http1=False, http2=True, timeout=None,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1,
                                keepalive_expiry=None))
    return httpx.AsyncClient(
        timeout=None, limits=httpx.Limits(max_connections=SHARD, max_keepalive_connections=SHARD))


async def _wait_parked(server: Server, runs: int) -> dict[str, object]:
    # Real sockets: wait_all_tasks_blocked cannot tell a parked stream from a connect
    # in flight, so ask the server how many streams it holds (the caller bounds it).
    while True:
        stats = await trio.to_thread.run_sync(server.stats)
        parked = int(stats["parked"])  # type: ignore[call-overload]
        if parked > runs:
            raise RuntimeError(f"{parked - runs} requests were made again: a parked call"
                               " failed and was retried")
        if parked == runs:
            break
        await trio.sleep(0.2)
    # Every reply is sent: once every task is blocked, with no socket left readable,
    # the last first chunks have reached their readers.
    await trio.testing.wait_all_tasks_blocked(0.5)
    return stats


async def _bare_one(client: httpx.AsyncClient, url: str) -> None:
    # httpx's leanest way to hold a streamed reply (``send(stream=True)``, not the
    # generator-based ``client.stream``), as OpenAIChatModel holds one, waiting for the
    # next chunk as a parked call does (over HTTP/2 that wait is a stream's own cost:
    # httpcore parks every reader but one on the connection's read lock): the baseline
    # keeps only what a connection and its stream cost.
    response = await client.send(client.build_request("POST", url, json=_PARK_BODY),
                                 stream=True)
    try:
        async for _ in response.aiter_bytes():
            pass
    finally:
        await response.aclose()


async def park(case: str, runs: int, meter: Meter, server: Server) -> dict[str, object]:
    """Park ``runs`` requests of ``case`` against ``server``, reading ``meter``
    before the first and once all are parked; the server's counters then."""
    shard = _per_client(case)
    clients = [_client(case) for _ in range(math.ceil(runs / shard))]
    per_client = _connections(case, shard)
    urls = [server.base_url(k * per_client // PORT_CONNECTIONS) for k in range(len(clients))]
    try:
        if case.endswith("bare"):
            return await _park_bare(runs, shard, meter, server, clients, urls)
        return await _park_pool(runs, shard, meter, server, clients, urls)
    finally:
        with trio.CancelScope(shield=True):
            for client in clients:
                await client.aclose()


async def _park_bare(
    runs: int, shard: int, meter: Meter, server: Server, clients: list[httpx.AsyncClient],
    urls: list[str],
) -> dict[str, object]:
    # One whole request first, so that what the first call imports is not counted.
    async with clients[0].stream("POST", urls[0] + "/chat/completions", json=_WARM_BODY) as r:
        await r.aread()
    async with trio.open_nursery() as nursery:
        meter.start()
        for i in range(runs):
            k = i // shard
            nursery.start_soon(_bare_one, clients[k], urls[k] + "/chat/completions")
        with trio.fail_after(_park_timeout(runs)):
            stats = await _wait_parked(server, runs)
        meter.stop(runs)
        nursery.cancel_scope.cancel()
    return stats


async def _park_pool(
    runs: int, shard: int, meter: Meter, server: Server, clients: list[httpx.AsyncClient],
    urls: list[str],
) -> dict[str, object]:
    # Parking 100,000 takes longer than a default read timeout (120 s) or idle timeout
    # (300 s): the first calls would time out (over HTTP/2, with every stream of their
    # connection) and be retried. The same timers, each longer than the parking.
    wait = 2 * _park_timeout(runs)
    async with subagent.open_pool(max_concurrent=runs, max_queued=runs) as pool:
        for k, (client, url) in enumerate(zip(clients, urls, strict=True)):
            model = OpenAIChatModel("park", api_key="bench", base_url=url, client=client,
                                    read_timeout=wait, total_timeout=wait)
            pool.register(subagent.Spec(f"parked{k}", model=model, idle_timeout=wait))
        # One whole run first, so that what the first run imports is not counted.
        warm = OpenAIChatModel("bench", api_key="bench", base_url=urls[0], client=clients[0])
        pool.register(subagent.Spec("warm", model=warm, tools=(ECHO,)))
        await (await pool.submit("warm", "warm up")).wait()
        meter.start()
        for i in range(runs):
            await pool.submit(f"parked{i // shard}", f"task {i}")
        with trio.fail_after(_park_timeout(runs)):
            stats = await _wait_parked(server, runs)
        assert pool.statistics().running == runs
        meter.stop(runs)
        pool.cancel()
    return stats


class TooFewFiles(Exception):
    """The open-file limit cannot be raised far enough for the connections."""


def measure(case: str, runs: int, meter: Meter) -> dict[str, object]:
    """Start a server sized for ``runs``, raise this process's open-file limit, park
    ``runs`` requests of ``case``; the connections, the limits used and the seconds
    parking took.

    Raises:
      TooFewFiles: the limit cannot be raised to a socket per connection and a margin
        (the server, in its own process, needs as many).
    """
    connections = _connections(case, runs)
    wanted = connections + _FD_MARGIN
    fds = _llmserver.raise_fd_limit(wanted)
    if fds < wanted:
        raise TooFewFiles(
            f"{connections:,} connections need {wanted:,} open files in each of the"
            f" two processes; the limit could be raised only to {fds:,} (the hard limit;"
            " raising it needs CAP_SYS_RESOURCE)"
        )
    ports = math.ceil(connections / PORT_CONNECTIONS)
    with Server(ports=ports, fds=wanted) as server:
        start = time.perf_counter()
        stats = trio.run(park, case, runs, meter, server)
        seconds = time.perf_counter() - start
    return {"connections": connections, "http2_connections": stats["http2_connections"],
            "fd_limit": fds, "server_ports": ports, "seconds": round(seconds, 1)}
