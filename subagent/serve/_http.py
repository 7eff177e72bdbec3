"""The HTTP side of the server, over plain ASGI: reading a bounded body, answering
JSON or a static file, and the checks every request passes (bearer token, Origin).

Nothing here knows the pool; ``_app`` routes requests to the hub.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import msgspec

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: The largest request body the server reads (bytes); a larger one is refused (413).
MAX_BODY_BYTES = 1 << 20

#: Sent with every answer: nothing is cached, sniffed, framed or given a referrer.
COMMON_HEADERS: list[tuple[bytes, bytes]] = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]

#: The page's policy: its own script and style only, requests to itself only.
CSP = (b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       b"img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class HttpError(Exception):
    """A request refused with ``status`` and a message for the client."""

    def __init__(self, status: int, message: str,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or []


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of the request header ``name`` (lower case), if any."""
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def read_body(scope: Scope, receive: Receive, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, at most ``limit`` bytes. A checkpoint.

    Raises:
      HttpError: 413 when the declared or the received length passes ``limit``;
        400 when the client went away first.
    """
    declared = header(scope, b"content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise HttpError(413, f"the request body is over {limit} bytes")
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise HttpError(400, "the client went away before its request body ended")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise HttpError(413, f"the request body is over {limit} bytes")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def decode(body: bytes, kind: type[Any]) -> Any:
    """``body`` decoded as JSON into ``kind`` (a msgspec Struct). Raises HttpError 400."""
    try:
        return msgspec.json.decode(body, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise HttpError(400, f"bad request body: {exc}") from None


def check_token(scope: Scope, token: bytes) -> None:
    """Raise HttpError 401 unless the request carries ``Authorization: Bearer
    <token>`` (compared in constant time). Not a checkpoint."""
    given = header(scope, b"authorization") or ""
    scheme, _, value = given.partition(" ")
    # Both sides hashed to a fixed length first: the comparison's time tells nothing,
    # not even the token's length.
    ok = scheme.lower() == "bearer" and hmac.compare_digest(
        _digest(value.strip().encode("latin-1")), _digest(token))
    if not ok:
        raise HttpError(401, "a bearer token is needed: Authorization: Bearer <token>",
                        [(b"www-authenticate", b'Bearer realm="subagent"')])


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


def check_changing(scope: Scope, allowed_origins: frozenset[str]) -> None:
    """The checks of a request that changes state: an ``Origin`` header, when sent
    (browsers send it), is this server's own (or one of ``allowed_origins``); a
    cross-site fetch is refused; the body is JSON (a plain HTML form cannot send it
    without a preflight). Raises HttpError 403 or 415. Not a checkpoint."""
    origin = header(scope, b"origin")
    if origin is not None:
        host = header(scope, b"host")
        own = f"{scope.get('scheme', 'http')}://{host}" if host else None
        if origin != own and origin not in allowed_origins:
            raise HttpError(403, "cross-origin request refused")
    if header(scope, b"sec-fetch-site") == "cross-site":
        raise HttpError(403, "cross-site request refused")
    kind = (header(scope, b"content-type") or "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise HttpError(415, "the request body must be application/json")


async def send_bytes(send: Send, status: int, body: bytes, content_type: bytes,
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer with ``body`` whole. A checkpoint."""
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"content-type", content_type),
                    (b"content-length", str(len(body)).encode()),
                    *COMMON_HEADERS, *(headers or [])],
    })
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_json(send: Send, status: int, value: Any,
                    headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer with ``value`` as JSON. A checkpoint."""
    await send_bytes(send, status, msgspec.json.encode(value), b"application/json", headers)


async def send_error(send: Send, error: HttpError) -> None:
    """Answer ``{"error": message}`` with the error's status. A checkpoint."""
    await send_json(send, error.status, {"error": error.message}, error.headers)
