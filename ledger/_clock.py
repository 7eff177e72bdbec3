"""Entry timestamps: UTC ISO-8601 with microseconds and a ``Z``."""

from __future__ import annotations

import time
from collections.abc import Callable

_cache: tuple[int, str] = (-1, "")


def utc_from_ns(ns: int) -> str:
    """Return ``ns`` (nanoseconds since the epoch, as ``time.time_ns()``) as
    ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (microseconds, cut, not rounded)."""
    global _cache
    micros = ns // 1000
    sec, frac = divmod(micros, 1_000_000)
    cached_sec, prefix = _cache
    if cached_sec != sec:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _cache = (sec, prefix)
    return f"{prefix}.{frac:06d}Z"


def utc_now() -> str:
    """Return the current UTC time as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    global _cache
    sec, frac = divmod(time.time_ns() // 1000, 1_000_000)  # utc_from_ns, inlined
    cached_sec, prefix = _cache
    if cached_sec != sec:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _cache = (sec, prefix)
    return f"{prefix}.{frac:06d}Z"


def read_clock(clock: Callable[[], str]) -> str:
    """Return ``clock()``, the time of an entry a sink records now: a str (one of a
    str subclass copied as the str it holds). Not a checkpoint.

    Raises:
      TypeError: ``clock`` returned anything else (refused when recorded: an
        entry's time is encoded as a JSON string).
    """
    when = clock()
    if type(when) is str:
        return when
    if isinstance(when, str):
        return str.__str__(when)
    raise TypeError(f"a sink's clock must return a str, not {type(when).__name__}")
