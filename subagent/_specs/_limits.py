"""The ``[limits.NAME]`` tables of a specs file (shared rate limits agents name), the
``retry`` tables of its agents (their retry policy) and its ``budget`` tables."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from agentcore import RetryPolicy
from agentcore.models import RateLimiter

from .._cost._budget import LIMITS, Budget

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


#: The fields of a ``retry`` table, each with its type and whether 0 is allowed.
RETRY_KEYS: dict[str, tuple[type, bool]] = {
    "max_attempts": (int, False),
    "base_delay": (float, True),
    "factor": (float, False),
    "max_delay": (float, True),
    "jitter": (float, True),
    "context_retries": (int, True),
    "length_retries": (int, True),
}


def read_retry(
    where: str,
    table: Any,
    error: Callable[[str, str], Exception],
    kind: Callable[[Any], str],
    shown: Callable[[object], str],
) -> RetryPolicy:
    """The :class:`~agentcore.RetryPolicy` of a ``retry`` table (any of its fields);
    not a checkpoint.

    Raises:
      What ``error(where, text)`` makes, for a value that is not a table, an unknown
      key, or a value of the wrong type, not positive (or negative where 0 is allowed),
      infinite, or a ``jitter`` above 1.
    """
    if not isinstance(table, Mapping):
        raise error(where, f"must be a table, not {kind(table)}")
    unknown = sorted(set(table) - set(RETRY_KEYS), key=str)
    if unknown:
        raise error(
            f"{where} key {shown(unknown[0])}",
            f"unknown; the keys are {', '.join(RETRY_KEYS)}",
        )
    values: dict[str, Any] = {}
    for key, value in table.items():
        want, zero = RETRY_KEYS[key]
        at = f"{where} key {key!r}"
        if isinstance(value, bool) or not isinstance(value, (want, int)):
            noun = "an integer" if want is int else "a number"
            raise error(at, f"must be {noun}, not {kind(value)}")
        if want is float:
            try:
                value = float(table[key])
            except OverflowError:  # an integer beyond any float
                value = math.inf
        if not (value >= 0 if zero else value > 0) or value == math.inf:
            least = "not negative" if zero else "positive"
            raise error(at, f"must be {least} and finite, not {shown(value)}")
        if key == "jitter" and value > 1:
            raise error(at, f"must be at most 1, not {shown(value)}")
        values[key] = value
    return RetryPolicy(**values)


#: The keys of a ``budget`` table (Budget's fields), each an integer or a number.
BUDGET_KEYS: dict[str, type] = {
    "tokens": int,
    "input_tokens": int,
    "output_tokens": int,
    "cost": float,
    "model_calls": int,
    "tasks": int,
    "warn_at": float,
    "grace": float,
}


def read_budget(
    where: str,
    table: Any,
    error: Callable[[str, str], Exception],
    kind: Callable[[Any], str],
    shown: Callable[[object], str],
) -> Budget:
    """The :class:`~subagent.Budget` of a ``budget`` table (an agent's, ``[defaults]``'s
    or ``[pool.budget]``); not a checkpoint.

    Raises:
      What ``error(where, text)`` makes, for a value that is not a table, an unknown
      key, a limit that is not a positive integer (a positive finite number for
      ``cost`` and ``grace``), a ``warn_at`` outside (0, 1], or a table with no limit.
    """
    if not isinstance(table, Mapping):
        raise error(where, f"must be a table, not {kind(table)}")
    unknown = sorted(set(table) - set(BUDGET_KEYS), key=str)
    if unknown:
        raise error(
            f"{where} key {shown(unknown[0])}", f"unknown; the keys are {', '.join(BUDGET_KEYS)}"
        )
    values: dict[str, Any] = {}
    for key, value in table.items():
        at = f"{where} key {key!r}"
        if BUDGET_KEYS[key] is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise error(at, f"must be an integer, not {kind(value)}")
            if value < 1:
                raise error(at, f"must be at least 1, not {shown(value)}")
        else:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise error(at, f"must be a number, not {kind(value)}")
            try:
                value = float(value)
            except OverflowError:  # an integer beyond any float
                value = math.inf
            if not (value > 0 and math.isfinite(value)):
                raise error(at, f"must be positive and finite, not {shown(value)}")
            if key == "warn_at" and value > 1:
                raise error(at, f"must be at most 1, not {shown(value)}")
        values[key] = value
    if not any(key in values for key in LIMITS):
        raise error(where, f"names no limit; give {', '.join(LIMITS)}")
    return Budget(**values)
