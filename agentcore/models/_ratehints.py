"""The waits a server's rate-limit headers ask for (sans-IO): ``Retry-After`` and the
resets of exhausted ``x-ratelimit-*`` quotas. The HTTP layer puts the result on a
:class:`~agentcore.TransientModelError` as ``retry_after``; a :class:`RateLimiter`
pauses on it, the agent loop's :class:`~agentcore.RetryPolicy` sleeps it (both cap it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime

from ._apierror import parse_retry_after

#: The longest header value read for a duration; longer ones are ignored.
_VALUE_CHARS = 64

_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)(h|ms|m|s))", re.ASCII)


def parse_duration(value: str) -> float | None:
    """Seconds in an OpenAI reset duration (``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``),
    a plain number of seconds, or an RFC 3339 time (Anthropic's resets); None if it is
    none of these."""
    value = value.strip()
    if not value or len(value) > _VALUE_CHARS:
        return None
    seconds = parse_retry_after(value)
    if seconds is not None:
        return seconds
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        unit = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
        return sum(float(n) * unit[u] for n, u in parts)
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def retry_hint(headers: Mapping[str, str]) -> float | None:
    """Seconds an error reply's headers ask to wait, or None: ``Retry-After`` when it
    parses, else the latest reset of an exhausted quota (``x-ratelimit-remaining-*``
    of ``0`` with its ``x-ratelimit-reset-*``, or Anthropic's
    ``anthropic-ratelimit-*-remaining`` and ``-reset``). Never raises."""
    retry_after = parse_retry_after(headers.get("retry-after"))
    if retry_after is not None:
        return retry_after
    hints = []
    for kind in ("requests", "tokens", "input-tokens", "output-tokens"):
        for remaining, reset in (
            (f"x-ratelimit-remaining-{kind}", f"x-ratelimit-reset-{kind}"),
            (f"anthropic-ratelimit-{kind}-remaining", f"anthropic-ratelimit-{kind}-reset"),
        ):
            if (headers.get(remaining) or "").strip() == "0":
                seconds = parse_duration(headers.get(reset) or "")
                if seconds is not None:
                    hints.append(seconds)
    return max(hints) if hints else None
