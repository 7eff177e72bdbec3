"""How the loop retries a failed or truncated model call: :class:`RetryPolicy`."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import attrs

from ._errors import ConfigurationError


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ConfigurationError(f"RetryPolicy {attribute.name} must be positive, not {value!r}")


def _not_negative(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if value < 0:
        raise ConfigurationError(
            f"RetryPolicy {attribute.name} must not be negative, not {value!r}"
        )


@attrs.frozen
class RetryPolicy:
    """How a run retries model calls. A value; pass it as ``Agent(retry=...)``.

    A :class:`~agentcore.TransientModelError` (the class adapters raise for HTTP
    429, 5xx and timeouts) is retried with exponential backoff: before retry ``n``
    (1 for the first) the loop emits a ``retry`` event and sleeps
    ``min(max_delay, base_delay * factor ** (n - 1))`` seconds, scaled by a random
    factor in ``[1 - jitter, 1 + jitter]``; when the error carries ``retry_after``
    the loop sleeps exactly that instead, but never more than ``max_delay`` (a
    server's ``Retry-After: 86400`` must not park a run for a day). At most
    ``max_attempts`` calls in all.

    A :class:`~agentcore.ContextTooLongError` drops the oldest half of the history
    and retries, at most ``context_retries`` times. A response with
    ``finish_reason == "length"`` gets a recovery prompt asking for a shorter
    complete answer and is retried at most ``length_retries`` times; after that
    the last response is used as it is.

    Attributes:
      max_attempts: Calls per model request when errors are transient (1 disables retrying).
      base_delay: Seconds before the first retry.
      factor: Growth of the delay per retry.
      max_delay: Upper bound of every delay, a server's ``retry_after`` hint included.
      jitter: Fraction of random spread around the computed delay; 0 for exact delays.
      random: Source of uniform numbers in ``[0, 1)`` for the jitter.
      context_retries: Retries after context-too-long errors.
      length_retries: Retries after truncated (``length``) responses.
    """

    max_attempts: int = attrs.field(default=3, validator=_positive)
    base_delay: float = attrs.field(default=1.0, validator=_not_negative)
    factor: float = attrs.field(default=2.0, validator=_positive)
    max_delay: float = attrs.field(default=60.0, validator=_not_negative)
    jitter: float = attrs.field(default=0.1, validator=_not_negative)
    random: Callable[[], float] = attrs.field(default=random.random, eq=False, repr=False)
    context_retries: int = attrs.field(default=2, validator=_not_negative)
    length_retries: int = attrs.field(default=2, validator=_not_negative)

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first).

        ``retry_after`` (the server's hint) wins when given, capped at ``max_delay``.
        """
        if retry_after is not None:
            return min(self.max_delay, max(0.0, retry_after))
        delay = min(self.max_delay, self.base_delay * self.factor ** (retry - 1))
        if self.jitter:
            delay *= 1 + self.jitter * (2 * self.random() - 1)
        return delay


#: The default policy: 3 attempts, 1 s then 2 s (±10 %), 2 context and 2 length retries.
DEFAULT_RETRY = RetryPolicy()
