"""Entry timestamps: UTC ISO-8601 with microseconds and a ``Z``."""

from __future__ import annotations

import time

_cache: tuple[int, str] = (-1, "")


def utc_now() -> str:
    """Return the current UTC time as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    global _cache
    now = time.time()
    sec = int(now)
    micros = int((now - sec) * 1_000_000)
    cached_sec, prefix = _cache
    if cached_sec != sec:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _cache = (sec, prefix)
    return f"{prefix}.{micros:06d}Z"
