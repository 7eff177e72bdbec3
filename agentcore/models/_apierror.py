"""What an error reply says, and the ModelError it becomes (sans-IO).

HTTP 408, 409, 429 and 5xx become :class:`~agentcore.TransientModelError` (with the
server's ``Retry-After``), a context overflow :class:`~agentcore.ContextTooLongError`,
anything else a plain :class:`~agentcore.ModelError`. The server's text is masked
(every form of the key) first and cut to :data:`~._limits.ERROR_TEXT_CHARS` after.
"""

from __future__ import annotations

import email.utils
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from .._errors import ContextTooLongError, ModelError, TransientModelError
from ._keys import redact
from ._limits import cut
from ._payload import try_loads

#: Statuses worth retrying besides 5xx: request timeout, conflict, rate limit.
_TRANSIENT_STATUSES = frozenset({408, 409, 429})


@attrs.frozen(slots=True)
class ApiError:
    """What an error response said.

    Attributes:
      status: The HTTP status, or None for an error event inside a stream.
      message: The server's message (or the body when it is not JSON), not yet cut.
      type: The error's ``type`` field, if any.
      code: The error's ``code`` field, if any.
    """

    status: int | None
    message: str
    type: str = ""
    code: str = ""


#: Decides from an error response whether the conversation was too long.
ContextCheck = Callable[[ApiError], bool]


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait according to a ``Retry-After`` header value, or None.

    The value is either a number of seconds or an HTTP date; a date in the past means 0.
    Anything unparseable (or negative, or not finite) means None. The hint is not
    capped here: :meth:`~agentcore.RetryPolicy.delay` caps it at ``max_delay``.
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
    (OpenAI, Anthropic), ``{"error": "text"}`` (Ollama) or any other text. Never
    raises; the message is whole (the caller masks, then cuts it)."""
    text = body.decode("utf-8", errors="replace")
    payload, _ = try_loads(text)
    if isinstance(payload, Mapping):
        error = payload.get("error")
        if isinstance(error, str):
            return ApiError(status, error)
        if isinstance(error, Mapping):
            return error_from_object(status, error)
        message = payload.get("message")
        if isinstance(message, str):
            return ApiError(status, message)
    return ApiError(status, text.strip() or "(empty body)")


def error_from_object(status: int | None, error: Mapping[str, Any]) -> ApiError:
    """The error an ``{"message", "type", "code"}`` object describes."""
    message, kind, code = error.get("message"), error.get("type"), error.get("code")
    return ApiError(
        status,
        message if isinstance(message, str) else "(no message)",
        kind if isinstance(kind, str) else "",
        code if isinstance(code, str) else "",
    )


def shown(text: str, secret: str) -> str:
    """Server text as an error message may quote it: the key masked, then cut."""
    return cut(redact(text, secret))


def api_error_to_exception(
    api: str,
    error: ApiError,
    *,
    secret: str,
    is_context_error: ContextCheck,
    retry_after: float | None = None,
) -> ModelError:
    """The ModelError to raise for ``error`` from ``api``; ``secret`` is masked out."""
    where = f"HTTP {error.status}" if error.status is not None else "error event"
    message = f"{api} API error ({where}): {shown(error.message, secret)}"
    if is_context_error(error):
        return ContextTooLongError(message)
    status = error.status
    if status is None:
        transient = error.type in ("server_error", "api_error", "overloaded_error")
    else:
        transient = status in _TRANSIENT_STATUSES or status >= 500
    if transient:
        return TransientModelError(message, retry_after=retry_after)
    return ModelError(message)
