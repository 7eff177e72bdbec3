"""The HTTP layer the model adapters share: requests on httpx, error mapping, Retry-After.

Every failure leaves this module as a :class:`~agentcore.ModelError`: HTTP 408, 409,
429 and 5xx, timeouts and dropped connections as :class:`~agentcore.TransientModelError`
(with the server's ``Retry-After``), a context overflow as
:class:`~agentcore.ContextTooLongError`, anything else (other 4xx, malformed JSON,
a bad URL) as a plain ``ModelError``. Nothing here retries: the agent loop does.
"""

from __future__ import annotations

import codecs
import contextlib
import email.utils
import functools
import json
import math
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast

import attrs
import trio

try:
    import httpx as httpx  # re-exported: the adapters import it from here, after this check
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "The model adapters need httpx, which is not installed: pip install 'subagent[models]'"
    ) from exc

from .._errors import ContextTooLongError, ModelError, TransientModelError
from .._messages import ModelResponse
from .._models import DeltaSink
from ._sse import ServerSentEvent, SSEParser

T = TypeVar("T")

#: Statuses worth retrying besides 5xx: request timeout, conflict, rate limit.
_TRANSIENT_STATUSES = frozenset({408, 409, 429})
_MAX_ERROR_TEXT = 500
#: Bound on the shielded cleanup of a stream left early (closing a socket is quick).
_CLEANUP_TIMEOUT = 5.0


class Malformed(Exception):
    """A response field is missing or of the wrong type (internal; adapters turn it into
    a ModelError naming the API)."""


@attrs.frozen(slots=True)
class ApiError:
    """What an error response said.

    Attributes:
      status: The HTTP status, or None for an error event inside a stream.
      message: The server's message (or the start of the body when it is not JSON).
      type: The error's ``type`` field, if any.
      code: The error's ``code`` field, if any.
    """

    status: int | None
    message: str
    type: str = ""
    code: str = ""


#: Decides from an error response whether the conversation was too long.
ContextCheck = Callable[[ApiError], bool]


def mask(_value: object) -> str:
    """The repr of a secret."""
    return "'***'"


@attrs.frozen(slots=True)
class Endpoint:
    """Where and how one adapter talks: a name for messages, the secret to keep out of
    them, timeouts, the context-overflow rule, and an optional caller-owned client."""

    api: str
    secret: str = attrs.field(repr=mask)
    connect_timeout: float
    read_timeout: float
    is_context_error: ContextCheck
    client: httpx.AsyncClient | None = None

    @property
    def timeout(self) -> httpx.Timeout:
        """The httpx timeouts: connect (and pool) and read (and write)."""
        return httpx.Timeout(
            connect=self.connect_timeout,
            read=self.read_timeout,
            write=self.read_timeout,
            pool=self.connect_timeout,
        )

    def redact(self, text: str) -> str:
        """``text`` with the secret replaced by ``***``."""
        return redact(text, self.secret)


#: Shorter "keys" are placeholders (``ollama``, ``x``); replacing them would garble text.
MIN_SECRET_LENGTH = 8


def redact(text: str, secret: str) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``***`` (secrets shorter
    than :data:`MIN_SECRET_LENGTH` are placeholders and left alone)."""
    return text.replace(secret, "***") if len(secret) >= MIN_SECRET_LENGTH else text


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait according to a ``Retry-After`` header value, or None.

    The value is either a number of seconds or an HTTP date; a date in the past means 0.
    Anything unparseable (or negative, or not finite) means None.
    """
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = now if now is not None else datetime.now(UTC)
    return max(0.0, (when - now).total_seconds())


def parse_api_error(status: int | None, body: bytes) -> ApiError:
    """The error a response body describes: ``{"error": {"message", "type", "code"}}``
    (OpenAI, Anthropic), ``{"error": "text"}`` (Ollama) or any other text."""
    text = body.decode("utf-8", errors="replace")
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):
        payload = None
    if isinstance(payload, Mapping):
        error = payload.get("error")
        if isinstance(error, str):
            return ApiError(status, error)
        if isinstance(error, Mapping):
            return error_from_object(status, error)
        message = payload.get("message")
        if isinstance(message, str):
            return ApiError(status, message)
    text = text.strip()
    if len(text) > _MAX_ERROR_TEXT:
        text = text[:_MAX_ERROR_TEXT] + "..."
    return ApiError(status, text or "(empty body)")


def error_from_object(status: int | None, error: Mapping[str, Any]) -> ApiError:
    """The error an ``{"message", "type", "code"}`` object describes."""
    message, kind, code = error.get("message"), error.get("type"), error.get("code")
    return ApiError(
        status,
        message if isinstance(message, str) else "(no message)",
        kind if isinstance(kind, str) else "",
        code if isinstance(code, str) else "",
    )


def api_error_to_exception(
    endpoint: Endpoint, error: ApiError, retry_after: float | None = None
) -> ModelError:
    """The ModelError to raise for ``error``."""
    where = f"HTTP {error.status}" if error.status is not None else "error event"
    message = endpoint.redact(f"{endpoint.api} API error ({where}): {error.message}")
    if endpoint.is_context_error(error):
        return ContextTooLongError(message)
    status = error.status
    if status is None:
        transient = error.type in ("server_error", "api_error", "overloaded_error")
    else:
        transient = status in _TRANSIENT_STATUSES or status >= 500
    if transient:
        return TransientModelError(message, retry_after=retry_after)
    return ModelError(message)


def _status_error(endpoint: Endpoint, response: httpx.Response) -> ModelError:
    error = parse_api_error(response.status_code, response.content)
    return api_error_to_exception(
        endpoint, error, parse_retry_after(response.headers.get("retry-after"))
    )


def _transport_error(endpoint: Endpoint, exc: httpx.HTTPError | httpx.InvalidURL) -> ModelError:
    detail = endpoint.redact(str(exc) or type(exc).__name__)
    if isinstance(exc, httpx.TimeoutException):
        kind = type(exc).__name__.removesuffix("Timeout").lower() or "request"
        return TransientModelError(f"{endpoint.api} request timed out ({kind} timeout)")
    if isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError | httpx.ProxyError):
        return TransientModelError(f"{endpoint.api} connection failed: {detail}")
    return ModelError(f"{endpoint.api} request failed: {detail}")


def decode_json(endpoint: Endpoint, body: bytes) -> Any:
    """``body`` parsed as JSON, or a ModelError saying it is malformed."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ModelError(f"{endpoint.api} API returned malformed JSON: {exc}") from None


@asynccontextmanager
async def _open_client(endpoint: Endpoint) -> AsyncIterator[httpx.AsyncClient]:
    if endpoint.client is not None:
        yield endpoint.client
        return
    async with httpx.AsyncClient(timeout=endpoint.timeout, verify=_ssl_context()) as client:
        yield client


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Built once: loading the CA bundle takes milliseconds of blocking file I/O.
    return httpx.create_ssl_context()


async def post_json(
    endpoint: Endpoint, url: str, headers: Mapping[str, str], body: Mapping[str, Any]
) -> Any:
    """POST ``body`` as JSON and return the parsed JSON reply. A checkpoint.

    Raises:
      TransientModelError: 408, 409, 429, 5xx, a timeout or a failed connection.
      ContextTooLongError: the endpoint's context check matched the error.
      ModelError: any other failure, including a malformed reply.
    """
    async with _open_client(endpoint) as client:
        try:
            response = await client.post(
                url, json=body, headers=dict(headers), timeout=endpoint.timeout
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise _transport_error(endpoint, exc) from None
    if response.status_code >= 400:
        raise _status_error(endpoint, response)
    return decode_json(endpoint, response.content)


def malformed_response(endpoint: Endpoint, exc: Malformed) -> ModelError:
    """The error for a reply whose JSON lacks a field or has one of the wrong type."""
    return ModelError(f"{endpoint.api} API returned a malformed response: {exc}")


#: Handles one event of a stream; returns True when it was the stream's last event.
#: It may raise :class:`Malformed` (reported as a ModelError naming the API).
EventHandler = Callable[[ServerSentEvent], Awaitable[bool]]


async def post_event_stream(
    endpoint: Endpoint,
    url: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    on_event: EventHandler,
) -> bool:
    """POST ``body`` as JSON and feed each server-sent event of the reply to
    ``on_event`` until it returns True. A checkpoint.

    Returns:
      True if ``on_event`` ended the stream, False if the server ended it first.

    Raises:
      TransientModelError: as :func:`post_json`, and when the connection drops.
      ContextTooLongError, ModelError: as :func:`post_json`; and whatever ``on_event``
        raises.
    """
    async with _open_client(endpoint) as client:
        try:
            async with client.stream(
                "POST", url, json=body, headers=dict(headers), timeout=endpoint.timeout
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise _status_error(endpoint, response)
                content_type = response.headers.get("content-type", "")
                if not content_type.startswith("text/event-stream"):
                    await response.aread()
                    raise ModelError(
                        f"{endpoint.api} API answered a streaming request with "
                        f"{content_type or 'no content type'}, not an event stream"
                    )
                parser = SSEParser()
                decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
                try:
                    async for chunk in chunks:
                        for event in parser.feed(decoder.decode(chunk)):
                            if await on_event(event):
                                return True
                finally:
                    await _finish(response, chunks)
                tail = parser.feed(decoder.decode(b"", final=True)) + parser.end()
                for event in tail:
                    if await on_event(event):
                        return True
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise _transport_error(endpoint, exc) from None
        except Malformed as exc:
            raise ModelError(f"{endpoint.api} API returned a malformed stream: {exc}") from None
    return False


async def _finish(response: httpx.Response, chunks: AsyncGenerator[bytes, None]) -> None:
    # httpx 0.28 reads bodies through nested async generators, and trio warns about any
    # left unfinished (aclosing the outer one does not close the inner ones). Closing
    # the connection first makes the next read fail at once, which finishes them all.
    with trio.move_on_after(_CLEANUP_TIMEOUT, shield=True):
        await response.aclose()
        with contextlib.suppress(httpx.HTTPError):
            async for _ in chunks:
                pass


def stream_ended_early(endpoint: Endpoint) -> TransientModelError:
    """The error for a stream that ended before its reply was complete."""
    return TransientModelError(f"{endpoint.api} stream ended before the reply was complete")


async def complete_json(
    endpoint: Endpoint,
    url: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    parse: Callable[[object], ModelResponse],
) -> ModelResponse:
    """POST ``body`` and return the reply ``parse`` makes of the JSON answer. A
    checkpoint. Raises as :func:`post_json`; a reply ``parse`` calls :class:`Malformed`
    is a ModelError naming the API."""
    payload = await post_json(endpoint, url, headers, body)
    try:
        return parse(payload)
    except Malformed as exc:
        raise malformed_response(endpoint, exc) from None


class StreamState(Protocol):
    """Accumulates the events of one streamed reply (sans-IO; an adapter's own class)."""

    @property
    def finished(self) -> bool:
        """Whether the reply's finish reason has been seen."""
        ...

    @property
    def stopped(self) -> bool:
        """Whether the events so far ended the stream."""
        ...

    def feed(self, data: Mapping[str, Any], /) -> str:
        """Take in one event's JSON data; return its text delta. May raise
        :class:`Malformed`."""
        ...

    def response(self) -> ModelResponse:
        """The reply the events so far make up."""
        ...


#: Reads one event of a stream: the JSON data to feed the state, an :class:`ApiError`
#: for an error event, or None for the stream's end marker. May raise :class:`Malformed`.
EventReader = Callable[[ServerSentEvent], Mapping[str, Any] | ApiError | None]


async def stream_reply(
    endpoint: Endpoint,
    url: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    read_event: EventReader,
    state: StreamState,
    on_delta: DeltaSink,
) -> ModelResponse:
    """POST ``body`` and build the streamed reply in ``state``, awaiting ``on_delta``
    with each text delta as it arrives. A checkpoint.

    The stream ends at the end marker ``read_event`` reports, or once ``state`` says
    it has stopped.

    Raises:
      TransientModelError: as :func:`post_event_stream`, and when the stream ends
        before ``state`` is finished.
      ContextTooLongError, ModelError: as :func:`post_event_stream`; an error event as
        :func:`api_error_to_exception` maps it; a malformed reply.
    """

    async def on_event(event: ServerSentEvent) -> bool:
        data = read_event(event)
        if data is None:
            return True
        if isinstance(data, ApiError):
            raise api_error_to_exception(endpoint, data)
        delta = state.feed(data)
        if delta:
            await on_delta(delta)
        return state.stopped

    ended = await post_event_stream(endpoint, url, headers, body, on_event)
    if not ended and not state.finished:
        raise stream_ended_early(endpoint)
    try:
        return state.response()
    except Malformed as exc:
        raise malformed_response(endpoint, exc) from None


_MISSING: Any = object()


def as_object(value: object, where: str) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else :class:`Malformed` naming ``where``."""
    if not isinstance(value, Mapping):
        raise Malformed(f"{where} is {_json_type(value)}, not an object")
    return value


def field(obj: Mapping[str, Any], key: str, kind: type[T], where: str, default: T = _MISSING) -> T:
    """``obj[key]`` checked to be a ``kind``; a missing or null field is ``default``
    when one is given, else :class:`Malformed` naming ``where.key``."""
    value = obj.get(key)
    if value is None:
        if default is _MISSING:
            raise Malformed(f"{where}.{key} is missing")
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise Malformed(f"{where}.{key} is {_json_type(value)}, not {_json_type_name(kind)}")
    return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return _json_type_name(type(value))


def _json_type_name(kind: type) -> str:
    names: dict[type, str] = {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }
    for base, name in names.items():
        if issubclass(kind, base):
            return name
    if issubclass(kind, Mapping):
        return "an object"
    return kind.__name__


def event_json(event: ServerSentEvent) -> Mapping[str, Any]:
    """The JSON object an event's data holds, or :class:`Malformed`."""
    try:
        payload = json.loads(event.data)
    except (ValueError, RecursionError) as exc:
        raise Malformed(f"a {event.event!r} event's data is not valid JSON ({exc})") from None
    return as_object(payload, f"a {event.event!r} event's data")
