"""The HTTP layer the model adapters share: bounded requests on httpx, error mapping.

Every failure leaves this module as a :class:`~agentcore.ModelError`: HTTP 408, 409,
429 and 5xx, timeouts (``total_timeout`` included) and dropped connections as
:class:`~agentcore.TransientModelError` (with the server's ``Retry-After``, or the reset
of an exhausted ``x-ratelimit-*`` quota: :func:`~._ratehints.retry_hint`), a context
overflow as :class:`~agentcore.ContextTooLongError`, anything else (other 4xx,
malformed JSON, a bad URL, a reply past one of its bounds) as a plain ``ModelError``.
No error text holds the key, and none is chained to an httpx exception or a JSON
decode error (either may quote the key or the whole reply). Nothing here retries:
the agent loop does.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import math
import ssl
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, Protocol, cast

import attrs
import trio

try:
    import httpx as httpx  # re-exported: the adapters import it from here, after this check
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "The model adapters need httpx, which is not installed: pip install 'subagent[models]'"
    ) from exc

from .._errors import ModelError, TransientModelError
from .._messages import ModelRequest, ModelResponse
from .._models import DeltaSink
from ._apierror import (
    ApiError,
    ContextCheck,
    api_error_to_exception,
    parse_api_error,
    shown,
)
from ._keys import mask
from ._limits import ERROR_BODY_BYTES, LimitExceeded, ReplyLimits, body_too_large, cut
from ._payload import Malformed, encode_input, try_loads
from ._prices import PriceTable, load_prices, priced
from ._ratehints import retry_hint
from ._sse import ServerSentEvent, SSEParser

#: Bound on the shielded cleanup of a stream left early (closing a socket is quick).
_CLEANUP_TIMEOUT = 5.0
# After a stream's end marker, how long and how many bytes the rest of its body (the
# chunked encoding's terminator, normally already in hand) may take to arrive for the
# connection to go back to the client's pool; past either, it is closed instead.
_REST_TIMEOUT = 0.25
_REST_BYTES = 4096


@attrs.frozen(slots=True)
class Endpoint:
    """Where and how one adapter talks: a name for messages, the secret to keep out of
    them, timeouts, the bounds on replies, the context-overflow rule, and an optional
    caller-owned client."""

    api: str
    secret: str = attrs.field(repr=mask)
    connect_timeout: float
    read_timeout: float
    total_timeout: float
    max_response_bytes: int
    limits: ReplyLimits
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

    def error(self, error: ApiError, retry_after: float | None = None) -> ModelError:
        """The ModelError for an error reply (the key masked, the text cut)."""
        return api_error_to_exception(
            self.api,
            error,
            secret=self.secret,
            is_context_error=self.is_context_error,
            retry_after=retry_after,
        )

    def exceeded(self, exc: LimitExceeded) -> ModelError:
        """The ModelError for a reply past one of its bounds."""
        return ModelError(f"{self.api} {exc}")

    def timed_out(self) -> TransientModelError:
        """The error for a call that ran past ``total_timeout``."""
        return TransientModelError(
            f"{self.api} call took longer than total_timeout ({self.total_timeout:g} s)"
        )


def _transport_error(endpoint: Endpoint, exc: httpx.HTTPError | httpx.InvalidURL) -> ModelError:
    detail = shown(str(exc) or type(exc).__name__, endpoint.secret)
    if isinstance(exc, httpx.TimeoutException):
        kind = type(exc).__name__.removesuffix("Timeout").lower() or "request"
        return TransientModelError(f"{endpoint.api} request timed out ({kind} timeout)")
    if isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError | httpx.ProxyError):
        return TransientModelError(f"{endpoint.api} connection failed: {detail}")
    return ModelError(f"{endpoint.api} request failed: {detail}")


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Built once: loading the CA bundle takes milliseconds of blocking file I/O.
    return httpx.create_ssl_context()


def _new_client(endpoint: Endpoint) -> httpx.AsyncClient:
    # The client of a call given none, closed with the call (_close).
    return httpx.AsyncClient(timeout=endpoint.timeout, verify=_ssl_context())


class _SentBody(httpx.AsyncByteStream):
    """A request body httpx reads as a stream, as many times as it sends the request
    within ``send`` (a retrying transport, an auth flow answering a 401), and that
    holds nothing once :meth:`release` is called when ``send`` has returned: given
    bytes, httpx keeps them in the request, which its response keeps, for as long as
    a streamed reply is open (the whole conversation, for every call parked in its
    stream).

    It is the request's ``stream`` itself, an iterator of its own class: given as
    ``content``, httpx wraps it in an async generator, which a cancel in the middle of
    the send (Ctrl-C) leaves unfinished, to be finalized after ``trio.run`` has
    returned ("Exception ignored ... RunFinishedError" on stderr)."""

    __slots__ = ("_content", "_left")

    def __init__(self, content: bytes) -> None:
        self._content: bytes | None = content
        self._left: bytes | None = None

    def __aiter__(self) -> _SentBody:
        self._left = self._content  # each pass sends the whole body again
        return self

    async def __anext__(self) -> bytes:
        left, self._left = self._left, None
        if left is None:
            raise StopAsyncIteration
        return left

    def release(self) -> None:
        """Let the body go (the request has been sent; no pass is made after it)."""
        self._content = self._left = None


def _request(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    url: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
) -> tuple[httpx.Request, _SentBody | None]:
    # The body is encoded here, not by httpx: encode_input cannot hit RecursionError
    # on tool inputs nested as deep as a reply could carry them. Its length is given,
    # so httpx sends it as it would bytes (not chunked). A caller's client with
    # request hooks is given the bytes: a hook may read ``request.content``, which
    # httpx refuses for a streamed body.
    content = encode_input(body).encode()
    sent = None if client.event_hooks["request"] else _SentBody(content)
    request = client.build_request(
        "POST",
        url,
        content=content if sent is None else b"",
        headers={
            **headers,
            "Content-Type": "application/json",
            "Content-Length": str(len(content)),
        },
        timeout=endpoint.timeout,
    )
    if sent is not None:
        request.stream = sent
    return request, sent


async def _send(
    client: httpx.AsyncClient, request: httpx.Request, sent: _SentBody | None
) -> httpx.Response:
    # The reply to ``request`` (from _request), its head read, its body to stream;
    # the request's body let go once sent. Redirects are never followed (_check_head).
    try:
        return await client.send(request, stream=True, follow_redirects=False)
    finally:
        if sent is not None:
            sent.release()


def _check_head(endpoint: Endpoint, response: httpx.Response) -> None:
    # Redirects are never followed, whatever a caller-owned client says (the send is
    # made with follow_redirects=False): httpx drops only ``Authorization`` on a
    # cross-origin redirect, so ``x-api-key`` (and the conversation, on a 307/308)
    # would go wherever the server points.
    if 300 <= response.status_code < 400:
        raise ModelError(
            f"{endpoint.api} API answered with a redirect "
            f"(HTTP {response.status_code}), which is not followed"
        )
    _check_encoding(endpoint, response)


async def _close(
    endpoint: Endpoint, client: httpx.AsyncClient, response: httpx.Response | None
) -> None:
    # The end of a call: its reply closed, and its client with it when the call made
    # its own (_new_client).
    try:
        if response is not None:
            await response.aclose()
    finally:
        if endpoint.client is None:
            await client.aclose()


def _check_encoding(endpoint: Endpoint, response: httpx.Response) -> None:
    # httpx decodes every layer of a stacked Content-Encoding, each chunk at once: a
    # few KB of gzip inside gzip inflate to GBs in one call, before _read_body can
    # count them. One layer inflates a read (64 KiB) to at most ~64 MiB; no server
    # stacks them, so more than one is refused before any byte is read.
    value = response.headers.get("content-encoding", "")
    layers = [c for c in value.lower().replace(" ", "").split(",") if c not in ("", "identity")]
    if len(layers) > 1:
        raise LimitExceeded(
            "reply has a Content-Encoding of more than one layer "
            f"({cut(shown(value, endpoint.secret), 100)!r})"
        )


async def _read_body(response: httpx.Response, limit: int, *, truncate: bool) -> bytes:
    # Counted after decompression (aiter_bytes decodes gzip and deflate), so a small
    # compressed bomb is stopped once its output passes the limit.
    parts: list[bytes] = []
    size = 0
    chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
    try:
        async for chunk in chunks:
            if size + len(chunk) > limit:
                if not truncate:
                    raise body_too_large(limit)
                parts.append(chunk[: limit - size])
                break
            size += len(chunk)
            parts.append(chunk)
    finally:
        await _finish(response, chunks)
    return b"".join(parts)


async def _error_reply(endpoint: Endpoint, response: httpx.Response) -> ModelError:
    limit = min(ERROR_BODY_BYTES, endpoint.max_response_bytes)
    body = await _read_body(response, limit + 1, truncate=True)
    if len(body) > limit:
        # Cut before the key is masked: an echoed key straddling the cut would keep its
        # first characters. Each character of a key takes at most 6 bytes in any form
        # redact() knows (``\u00NN``), so dropping that many keeps no part of it.
        body = body[: max(0, limit - 6 * len(endpoint.secret))]
    return endpoint.error(
        parse_api_error(response.status_code, body),
        retry_hint(response.headers),
    )


async def post_json(
    endpoint: Endpoint, url: str, headers: Mapping[str, str], body: Mapping[str, Any]
) -> Any:
    """POST ``body`` as JSON and return the parsed JSON reply. A checkpoint.

    The whole call (connecting, sending, reading) ends within ``total_timeout``; the
    decoded body may hold at most ``max_response_bytes``.

    Raises:
      TransientModelError: 408, 409, 429, 5xx, a timeout or a failed connection.
      ContextTooLongError: the endpoint's context check matched the error.
      ModelError: any other failure, including a malformed or too large reply.
    """
    error: ModelError
    content: bytes | None = None
    with trio.move_on_after(endpoint.total_timeout) as deadline:
        try:
            client = endpoint.client or _new_client(endpoint)
            response: httpx.Response | None = None
            try:
                response = await _send(client, *_request(client, endpoint, url, headers, body))
                _check_head(endpoint, response)
                if response.status_code >= 400:
                    error = await _error_reply(endpoint, response)
                else:
                    content = endpoint.limits.check_body(
                        await _read_body(response, endpoint.max_response_bytes, truncate=False)
                    )
            finally:
                await _close(endpoint, client, response)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            error = _transport_error(endpoint, exc)
        except LimitExceeded as exc:
            error = endpoint.exceeded(exc)
        else:
            if content is not None:
                payload, problem = try_loads(content)
                if problem is None:
                    return payload
                error = ModelError(f"{endpoint.api} API returned malformed JSON: {problem}")
    if deadline.cancelled_caught:
        raise endpoint.timed_out()
    # Raised here, outside the handlers, so no httpx error is chained to it.
    raise error


async def complete_json(
    endpoint: Endpoint,
    url: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    parse: Callable[[object], ModelResponse],
) -> ModelResponse:
    """POST ``body`` and return the reply ``parse`` makes of the JSON answer. A
    checkpoint. Raises as :func:`post_json`; a reply ``parse`` calls :class:`Malformed`,
    or one past the endpoint's reply limits, is a ModelError naming the API."""
    payload = await post_json(endpoint, url, headers, body)
    error: ModelError
    try:
        return endpoint.limits.check(parse(payload))
    except Malformed as exc:
        error = malformed_response(endpoint, exc)
    except LimitExceeded as exc:
        error = endpoint.exceeded(exc)
    raise error


def malformed_response(endpoint: Endpoint, exc: Malformed) -> ModelError:
    """The error for a reply whose JSON lacks a field or has one of the wrong type."""
    detail = shown(str(exc), endpoint.secret)
    return ModelError(f"{endpoint.api} API returned a malformed response: {detail}")


async def _read_rest(chunks: AsyncGenerator[bytes, None]) -> None:
    # Read what little is left of a body whose stream has ended, so that a pooled
    # connection (a caller's client) is kept alive rather than closed and reopened.
    size = 0
    with trio.move_on_after(_REST_TIMEOUT):
        async for chunk in chunks:
            size += len(chunk)
            if size > _REST_BYTES:
                return


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
        :class:`Malformed` or :class:`LimitExceeded`."""
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
    build: Callable[[ModelRequest], tuple[Mapping[str, str], Mapping[str, Any]]],
    model_request: ModelRequest,
    read_event: EventReader,
    state: StreamState,
    on_delta: DeltaSink,
    model: str,
    prices: PriceTable | None,
) -> ModelResponse:
    """POST the body ``build(model_request)`` gives (with its headers) as JSON,
    built once this is awaited (as an ``async def`` model's would be: what ``build``
    raises, it raises, in the awaiting task), and build the streamed reply in ``state`` from the
    server-sent events of the answer, awaiting ``on_delta`` with each text delta as it
    arrives; return it priced (:func:`~._prices.priced`, the configured ``model`` and
    the caller's ``prices``). A checkpoint.

    The stream ends at the end marker ``read_event`` reports, or once ``state`` says
    it has stopped. The call ends within ``total_timeout``, not counting the time
    ``on_delta`` takes (a slow consumer is not the server's fault). The stream's
    decoded bytes are bounded by ``max_response_bytes``, each line and event by the
    limits' ``max_event_chars``.

    One coroutine from the request to the read loop, under one deadline scope, that
    lets go of the request (its body, headers, URL) once sent: a call parked in the
    stream holds this frame and httpx's, nothing else of ours but the parser and
    ``state`` (bench/README.md, W7 parked).

    Raises:
      TransientModelError: 408, 409, 429, 5xx, a timeout (``total_timeout``
        included), a failed or dropped connection, a stream that ends before
        ``state`` is finished.
      ContextTooLongError: the endpoint's context check matched the error.
      ModelError: any other failure: an error event as :func:`api_error_to_exception`
        maps it, a malformed or too large reply, no event stream.

    Whatever ``on_delta`` raises propagates as it is (an httpx error of its own too).
    """
    await load_prices()
    headers, body = build(model_request)
    del build, model_request
    error: Exception | None = None
    ended = False
    with trio.move_on_after(endpoint.total_timeout) as deadline:
        try:
            client = endpoint.client or _new_client(endpoint)
            response: httpx.Response | None = None
            try:
                request = _request(client, endpoint, url, headers, body)
                del url, headers, body  # not kept while the reply is read
                response = await _send(client, *request)
                del request
                _check_head(endpoint, response)
                content_type = response.headers.get("content-type", "")
                if response.status_code >= 400:
                    error = await _error_reply(endpoint, response)
                elif not content_type.startswith("text/event-stream"):
                    kind = cut(shown(content_type, endpoint.secret), 100) or "no content type"
                    error = ModelError(
                        f"{endpoint.api} API answered a streaming request with {kind}, "
                        "not an event stream"
                    )
                else:
                    parser = SSEParser(endpoint.limits.max_event_chars)
                    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                    size = 0
                    chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
                    try:
                        async for chunk in chunks:
                            size += len(chunk)
                            if size > endpoint.max_response_bytes:
                                raise body_too_large(endpoint.max_response_bytes)
                            events = parser.feed(decoder.decode(chunk))
                            if events and await _deliver(
                                endpoint, events, read_event, state, on_delta, deadline
                            ):
                                ended = True
                                await _read_rest(chunks)
                                break
                    finally:
                        await _finish(response, chunks)
                    if not ended:
                        events = parser.feed(decoder.decode(b"", final=True)) + parser.end()
                        ended = await _deliver(
                            endpoint, events, read_event, state, on_delta, deadline
                        )
            finally:
                await _close(endpoint, client, response)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            error = _transport_error(endpoint, exc)
        except LimitExceeded as exc:
            error = endpoint.exceeded(exc)
        except Malformed as exc:
            detail = shown(str(exc), endpoint.secret)
            error = ModelError(f"{endpoint.api} API returned a malformed stream: {detail}")
        except _ConsumerFailed as exc:
            error = exc.error  # on_delta's own, raised as it is
    if deadline.cancelled_caught and not ended:
        # (Once ended, the deadline can only have cut the drained tail, _read_rest:
        # the reply is whole.)
        raise endpoint.timed_out()
    # Raised here, outside the handlers, so no httpx error is chained to it.
    if error is not None:
        raise error
    if not ended and not state.finished:
        raise stream_ended_early(endpoint)
    try:
        return priced(state.response(), model, prices)
    except Malformed as exc:
        error = malformed_response(endpoint, exc)
    raise error


class _ConsumerFailed(Exception):
    """An error of ``on_delta`` of a type :func:`stream_reply` takes for the server's
    (an httpx error, say), carried past those handlers to be raised as it is."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error


async def _deliver(
    endpoint: Endpoint,
    events: list[ServerSentEvent],
    read_event: EventReader,
    state: StreamState,
    on_delta: DeltaSink,
    deadline: trio.CancelScope,
) -> bool:
    # Feed ``events`` to ``state``, awaiting ``on_delta`` with each text delta; True
    # once the stream has ended (its end marker, or ``state`` stopped). Raises the
    # error of an error event, and Malformed or LimitExceeded as ``read_event`` and
    # ``state`` do.
    for event in events:
        data = read_event(event)
        if data is None:
            return True
        if isinstance(data, ApiError):
            raise endpoint.error(data)
        delta = state.feed(data)
        if delta:
            # The consumer's time does not count: the deadline is lifted meanwhile and
            # put back with what was left of it.
            left = deadline.deadline - trio.current_time()
            deadline.deadline = math.inf
            try:
                await on_delta(delta)
            except (httpx.HTTPError, httpx.InvalidURL, LimitExceeded, Malformed) as exc:
                # The consumer's (an httpx call of its own, say), not the server's.
                raise _ConsumerFailed(exc) from None
            finally:
                deadline.deadline = trio.current_time() + left
        if state.stopped:
            return True
    return False
