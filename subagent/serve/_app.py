"""The ASGI application: :func:`app` routes each request to the hub (``_hub``),
after the checks of ``_http``, and serves the page (``static/``).

Endpoints (all under ``/api/`` need ``Authorization: Bearer <token>``; those that
change state also pass the Origin check and take JSON):

- ``GET /api/agents``: the agents a task can be submitted to.
- ``POST /api/tasks`` ``{"agent", "text", "history"?}``: start a root task (201).
- ``GET /api/tasks``, ``GET /api/tasks/<id>``: root tasks, status and result.
- ``POST /api/tasks/<id>/cancel``: cancel a task and its tree.
- ``GET /api/events[?task=<id>]``: events as Server-Sent Events (``Last-Event-ID``).
- ``GET /api/approvals``: the calls waiting for a human, with their arguments.
- ``POST /api/approvals/approve`` / ``deny`` ``{"tree", "call_id", "path"?, "reason"?,
  "by"?}``: answer one; the tree resumes once none waits.
- ``GET /api/tree``: every run (status, turn, tokens, cost) and each tree's totals.
- ``GET /api/stats``: the pool's statistics, the budget left, the server's counts.

``GET /`` (and its ``/app.js``, ``/app.css``) is the page: static, holding no data,
served without a token (a browser cannot send a header when it opens a page); it
asks for the token or reads it from the URL's fragment (``#token=...``).
"""

from __future__ import annotations

import os
import secrets
import urllib.parse
from importlib import resources
from typing import Any

import attrs
import msgspec
import trio

import subagent

from ._http import (
    CSP,
    HttpError,
    Receive,
    Scope,
    Send,
    check_changing,
    check_token,
    decode,
    read_body,
    send_bytes,
    send_error,
    send_json,
)
from ._hub import Hub, ServeError, _History, history_of
from ._sse import stream_events

#: The environment variable that gives the token (else one is generated).
TOKEN_VARIABLE = "SUBAGENT_SERVE_TOKEN"
#: The shortest token accepted.
MIN_TOKEN_CHARS = 16
#: The most events the server's log holds (older ones are dropped for late readers).
MAX_EVENTS = 10_000
#: The most characters of a ``by`` and of a ``reason``.
MAX_BY_CHARS = 200
MAX_REASON_CHARS = 2000

_STATIC = {
    "/": ("index.html", b"text/html; charset=utf-8"),
    "/app.js": ("app.js", b"text/javascript; charset=utf-8"),
    "/app.css": ("app.css", b"text/css; charset=utf-8"),
}


class _Submit(msgspec.Struct, forbid_unknown_fields=True):
    agent: str
    text: str
    history: list[_History] = []


class _Answer(msgspec.Struct, forbid_unknown_fields=True):
    tree: str
    call_id: str
    path: list[str] | None = None
    reason: str = ""
    by: str = ""


def _token(given: str | None) -> str:
    token = given if given is not None else os.environ.get(TOKEN_VARIABLE)
    if token is None:
        return secrets.token_urlsafe(32)
    if len(token) < MIN_TOKEN_CHARS or not token.isascii() or not token.isprintable():
        raise ServeError(f"the token must be at least {MIN_TOKEN_CHARS} printable ASCII "
                         "characters")
    return token


def _first(exc: BaseException) -> BaseException:
    # The first exception a group holds, however nested.
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


class ServeApp:
    """The ASGI application of :func:`app`. ``token`` is the bearer token every API
    request needs; ``hub`` the server's state. Its background work (reading the
    pool's events, following tasks) runs in the ASGI lifespan: serve it with a server
    that runs the lifespan (Hypercorn does)."""

    def __init__(self, pool: subagent.Pool, *, token: str | None, budget: subagent.Budget | None,
                 max_events: int, allowed_origins: frozenset[str], recover: bool) -> None:
        self.token = _token(token)
        self._token = self.token.encode("ascii")
        self.hub = Hub(pool, budget=budget, max_events=max_events, recover=recover)
        self.epoch = secrets.token_hex(4)
        self.allowed_origins = allowed_origins
        #: Why the lifespan's startup failed (the hub could not start: an unreadable
        #: checkpoint file, a second recovery of it), once it has; else None.
        self.startup_error: str | None = None
        self._running = False
        files = resources.files(__package__).joinpath("static")
        self._static = {route: (files.joinpath(name).read_bytes(), kind)
                        for route, (name, kind) in _STATIC.items()}

    def __repr__(self) -> str:
        return f"<subagent.serve.ServeApp running={self._running}>"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            try:
                await self._http(scope, receive, send)
            except HttpError as exc:
                await send_error(send, exc)
            except ServeError as exc:
                await send_error(send, HttpError(exc.status, str(exc)))

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        # The hub runs for the lifespan's life: from startup until shutdown.
        await receive()  # lifespan.startup
        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(self.hub.run)
            except* (subagent.SubagentError, OSError) as group:
                # The hub's own nursery wraps what its start raised (strict groups).
                self.startup_error = " ".join(str(_first(group)).split())[:500]
            if self.startup_error is None:
                self._running = True
                await send({"type": "lifespan.startup.complete"})
                await receive()  # lifespan.shutdown
                self._running = False
                nursery.cancel_scope.cancel()
        if self.startup_error is not None:
            # Sent out of the nursery: the server's answer to it (Hypercorn raises its
            # LifespanFailureError from send) leaves the app bare, not in a group, which
            # Hypercorn before 0.17.3 took for a lifespan it could go on without.
            await send({"type": "lifespan.startup.failed", "message": self.startup_error})
            return
        await send({"type": "lifespan.shutdown.complete"})

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope["method"], scope["path"]
        if path in self._static:
            if method not in ("GET", "HEAD"):
                raise HttpError(405, "method not allowed")
            body, kind = self._static[path]
            await send_bytes(send, 200, body, kind, [(b"content-security-policy", CSP)])
            return
        if path == "/favicon.ico":  # the page has none; a browser asks all the same
            await send_bytes(send, 204, b"", b"image/x-icon")
            return
        if not path.startswith("/api/"):
            raise HttpError(404, "not found")
        check_token(scope, self._token)
        if not self._running:
            raise HttpError(503, "the server is not running (its ASGI lifespan has not started)")
        if method == "POST":
            check_changing(scope, self.allowed_origins)
            body = await read_body(scope, receive)
            await send_json(send, *await self._post(path, body))
        elif method == "GET":
            if path == "/api/events":
                query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
                task = query.get("task", [""])[0]
                prefix = (self.hub.entry(task).id,) if task else ()
                await stream_events(self.hub, self.epoch, scope, receive, send, prefix)
                return
            await send_json(send, 200, self._get(path))
        else:
            raise HttpError(405, "method not allowed")

    def _get(self, path: str) -> Any:
        hub = self.hub
        if path == "/api/agents":
            return {"agents": sorted(hub.pool.specs)}
        if path == "/api/tasks":
            return {"tasks": [e.wire() for e in hub.tasks.values()]}
        if path.startswith("/api/tasks/"):
            return hub.entry(urllib.parse.unquote(path[len("/api/tasks/"):])).wire()
        if path == "/api/approvals":
            return {"approvals": hub.approvals()}
        if path == "/api/tree":
            return hub.tree.wire()
        if path == "/api/stats":
            events = hub.pool.events
            return {"pool": attrs.asdict(hub.pool.statistics()),
                    "budget": hub.budget_left(),
                    "server": attrs.asdict(hub.statistics()),
                    "stream": None if events is None else attrs.asdict(events.statistics()),
                    "failed_recoveries": [{"run_id": r, "error": e} for r, e in hub.failed]}
        raise HttpError(404, "not found")

    async def _post(self, path: str, body: bytes) -> tuple[int, Any]:
        hub = self.hub
        if path == "/api/tasks":
            submit = decode(body, _Submit)
            entry = await hub.submit(submit.agent, submit.text, history_of(submit.history))
            return 201, entry.wire()
        if path.startswith("/api/tasks/") and path.endswith("/cancel"):
            task_id = urllib.parse.unquote(path[len("/api/tasks/"):-len("/cancel")])
            return 200, hub.cancel(task_id).wire()
        if path in ("/api/approvals/approve", "/api/approvals/deny"):
            answer = decode(body, _Answer)
            if len(answer.by) > MAX_BY_CHARS or len(answer.reason) > MAX_REASON_CHARS:
                raise HttpError(400, f"'by' is limited to {MAX_BY_CHARS} characters and "
                                f"'reason' to {MAX_REASON_CHARS}")
            done = await hub.answer(answer.tree, answer.call_id, answer.path,
                                    allow=path.endswith("/approve"), reason=answer.reason,
                                    by=answer.by or "web")
            return 200, done
        raise HttpError(404, "not found")


def app(pool: subagent.Pool, *, token: str | None = None, budget: subagent.Budget | None = None,
        max_events: int = MAX_EVENTS, allowed_origins: frozenset[str] = frozenset(),
        recover: bool = True) -> ServeApp:
    """The pool over HTTP: an ASGI application with the JSON API, the event stream and
    the page (see the module docstring). Not a checkpoint; no I/O until served.

    Args:
      pool: An open pool with an event stream (``open_pool(events=...)``) that the
        app alone reads. Register its specs before serving.
      token: The bearer token; default ``$SUBAGENT_SERVE_TOKEN``, else a new random one
        (``ServeApp.token``).
      budget: The pool's budget, shown with what is left of it.
      max_events: How many events the log holds for readers that resume or lag.
      allowed_origins: Origins besides the server's own whose requests may change state.
      recover: With the pool's checkpoints, resume what a crash left and list the
        trees that wait for answers when the server starts.

    Raises:
      ServeError: the pool has no event stream, or the token is too short.
    """
    return ServeApp(pool, token=token, budget=budget, max_events=max_events,
                    allowed_origins=allowed_origins, recover=recover)
