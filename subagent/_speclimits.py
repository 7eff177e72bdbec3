"""The ``[limits.NAME]`` tables of a specs file: shared rate limits agents name."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from agentcore.models import RateLimiter

#: The fields of a ``[limits.NAME]`` table.
LIMIT_KEYS = ("requests_per_minute", "tokens_per_minute")


def read_limits(
    tables: Mapping[str, Any],
    error: Callable[[str, str], Exception],
    kind: Callable[[Any], str],
) -> dict[str, RateLimiter]:
    """One :class:`~agentcore.models.RateLimiter` per table, by name; not a checkpoint.

    Raises:
      What ``error(where, text)`` makes, for a table that is not one, an unknown field,
      a rate that is not a positive finite number, or a table naming no rate.
    """
    limiters = {}
    for name, table in tables.items():
        where = f"[limits.{name}]"
        if not isinstance(table, Mapping):
            raise error(where, f"must be a table, not {kind(table)}")
        unknown = sorted(set(table) - set(LIMIT_KEYS), key=str)
        if unknown:
            raise error(
                f"{where} field {unknown[0]!r}", f"unknown; the fields are {', '.join(LIMIT_KEYS)}"
            )
        rates = {}
        for key in LIMIT_KEYS:
            value = table.get(key)
            if value is None:
                continue
            try:
                rate = -1.0 if isinstance(value, bool) else float(value)
            except (TypeError, ValueError, OverflowError):
                rate = -1.0
            if not 0 < rate < math.inf:
                raise error(
                    f"{where} field {key!r}",
                    f"must be a positive number a minute, not {kind(value)}",
                )
            rates[key] = rate
        if not rates:
            raise error(where, f"names no limit; give {' or '.join(LIMIT_KEYS)}")
        limiters[name] = RateLimiter(**rates)
    return limiters
