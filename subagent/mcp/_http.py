"""The HTTP client of the streamable HTTP transport, with bounds on what a server sends.

The SDK reads a JSON reply whole (``aread``), however large, and its HTTP client
decodes every layer of a stacked ``Content-Encoding``, so that a few KB of gzip inside
gzip inflate to GBs before anything counts them. Here every reply that is not an
event stream may hold at most :data:`MAX_HTTP_MESSAGE` bytes, and a compressed reply is
refused (the client asks for none: ``Accept-Encoding: identity``). Past either, reading
the reply fails with an ``httpx2.StreamError``, which the SDK turns into an error for
that request. Events of an event stream are bounded by the SDK (1 MiB each).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx2

#: The most bytes of one reply (not an event stream) an HTTP MCP server may send: 1 MiB,
#: as much as the SDK lets one event of a stream hold.
MAX_HTTP_MESSAGE = 1024 * 1024


def bounded_client(headers: Mapping[str, str]) -> httpx2.AsyncClient:
    """An HTTP client as the SDK's ``create_mcp_http_client`` makes it (its timeouts,
    ``headers`` on every request), whose replies are bounded. Not a checkpoint."""
    import httpx2
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    class TooMuch(httpx2.StreamError):
        """A reply past a bound (the SDK reports a StreamError as a failed reply)."""

    class Capped(httpx2.AsyncByteStream):
        def __init__(self, inner: httpx2.AsyncByteStream, refused: str | None) -> None:
            self._inner = inner
            self._refused = refused
            self._size = 0

        async def __aiter__(self) -> AsyncIterator[bytes]:
            if self._refused is not None:
                raise TooMuch(self._refused)
            parts = self._inner.__aiter__()
            async for part in parts:
                self._size += len(part)
                if self._size > MAX_HTTP_MESSAGE:
                    # The transport reads through nested generators, and trio warns
                    # about any left unfinished (closing the outer one leaves the
                    # inner ones): closing the connection makes the next read fail
                    # at once, which finishes them all.
                    await self._inner.aclose()
                    with contextlib.suppress(httpx2.HTTPError, OSError):
                        async for _ in parts:
                            pass
                    raise TooMuch(f"the reply is larger than {MAX_HTTP_MESSAGE} bytes")
                yield part

        async def aclose(self) -> None:
            await self._inner.aclose()

    class Bounded(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            response = await self._inner.handle_async_request(request)
            encoding = response.headers.get("content-encoding", "").strip().lower()
            kind = response.headers.get("content-type", "").strip().lower()
            refused = None
            if encoding not in ("", "identity"):
                refused = "the reply is compressed (Content-Encoding), which is refused"
            elif kind.startswith("text/event-stream"):
                return response
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = Capped(response.stream, refused)
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    return httpx2.AsyncClient(
        timeout=timeout,
        headers={"Accept-Encoding": "identity", **headers},
        transport=Bounded(),
    )
