"""Shared rate limits for model calls: :class:`RateLimiter` (the bucket) and
:class:`RateLimited` (a model that waits on one).

The rules live in :class:`Buckets`, pure code with no I/O and no clock of its own; the
limiter around it only takes the lock, sleeps and wakes.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from .._errors import ConfigurationError, TransientModelError
from .._messages import ModelRequest, ModelResponse
from .._models import ChatModel, DeltaSink
from ._fallback import model_name

#: The longest pause a server's hint may impose on a limiter by default, seconds.
DEFAULT_MAX_PAUSE = 60.0
#: Below this much missing, a bucket counts as holding enough (float rounding).
_EPSILON = 1e-9


def _check_rate(name: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number, not {value!r}")
    if not (value > 0 and math.isfinite(value)):
        raise ConfigurationError(f"{name} must be a positive finite number, not {value!r}")


@attrs.define
class Buckets:
    """The state of a rate limit (sans-IO): a request bucket, a token bucket and a pause.

    Both buckets refill continuously, at a minute's allowance per minute, up to their
    burst. A request may start when the request bucket holds one request (it takes
    it), the token bucket is not in debt, and no pause is running. A starting request
    is charged an :meth:`estimate` of its tokens, settled against its usage when it
    answers; the token bucket may go into debt: requests wait until it has refilled
    to zero.

    Invariants: ``0 <= requests <= request_burst``; ``tokens <= token_burst``.

    Attributes:
      requests_per_minute: The request rate, or None for no request limit.
      tokens_per_minute: The token rate, or None for no token limit.
      request_burst: Requests the bucket holds when full.
      token_burst: Tokens the bucket holds when full.
      requests: Requests available now (as of ``updated``).
      tokens: Tokens available now (as of ``updated``); negative when in debt.
      paused_until: No request starts before this time (a server's hint).
      updated: The time of the last refill; None until the first (full until then).
      answered: Calls whose tokens were charged.
      answered_tokens: The tokens they used, together.
    """

    requests_per_minute: float | None
    tokens_per_minute: float | None
    request_burst: float
    token_burst: float
    requests: float
    tokens: float
    paused_until: float = -math.inf
    updated: float | None = None
    answered: int = 0
    answered_tokens: int = 0

    @classmethod
    def full(
        cls,
        requests_per_minute: float | None,
        tokens_per_minute: float | None,
        *,
        request_burst: float | None = None,
        token_burst: float | None = None,
    ) -> Buckets:
        """Full buckets. The request burst defaults to 1 (calls evenly spaced:
        providers enforce a per-minute limit over shorter windows), the token burst to
        one second's allowance."""
        if request_burst is None:
            request_burst = 1.0
        if token_burst is None:
            token_burst = (tokens_per_minute or 60.0) / 60
        return cls(
            requests_per_minute,
            tokens_per_minute,
            request_burst,
            token_burst,
            request_burst,
            token_burst,
        )

    def refill(self, now: float) -> None:
        """Add what the buckets earned since the last refill."""
        if self.updated is None:
            self.updated = now
        elapsed = max(0.0, now - self.updated)
        self.updated = max(self.updated, now)
        if self.requests_per_minute is not None:
            self.requests = min(
                self.request_burst, self.requests + elapsed * self.requests_per_minute / 60
            )
        if self.tokens_per_minute is not None:
            self.tokens = min(
                self.token_burst, self.tokens + elapsed * self.tokens_per_minute / 60
            )

    def wait(self, now: float) -> float:
        """Seconds until a request may start (0 if now), refilling first."""
        self.refill(now)
        wait = max(0.0, self.paused_until - now)
        if self.requests_per_minute is not None and self.requests < 1 - _EPSILON:
            wait = max(wait, (1 - self.requests) * 60 / self.requests_per_minute)
        if self.tokens_per_minute is not None and self.tokens < -_EPSILON:
            wait = max(wait, -self.tokens * 60 / self.tokens_per_minute)
        return wait

    def estimate(self) -> float:
        """The tokens a call is expected to use: the mean of the calls answered so
        far, 0 before the first (or without a token limit)."""
        if self.tokens_per_minute is None or not self.answered:
            return 0.0
        return self.answered_tokens / self.answered

    def take(self, now: float) -> float:
        """Start a request: take one from the request bucket and charge the token
        :meth:`estimate`, which is returned (to be settled). Only after ``wait(now) == 0``."""
        assert self.wait(now) == 0, "a request was taken before its turn"
        if self.requests_per_minute is not None:
            self.requests = max(0.0, self.requests - 1)
        estimate = self.estimate()
        self.tokens -= estimate
        return estimate

    def settle(self, now: float, estimate: float, tokens: int | None) -> None:
        """Charge what a finished call used (at most a minute's allowance) in place of
        its ``estimate``; ``tokens`` None (the call failed, or was cancelled) gives the
        estimate back."""
        self.refill(now)
        if self.tokens_per_minute is None:
            return
        if tokens is None:
            self.tokens = min(self.token_burst, self.tokens + estimate)
            return
        # A server's usage figure is not trusted to stall the limiter for more than a
        # minute: one answer is charged at most one minute's tokens.
        tokens = min(max(0, tokens), math.ceil(self.tokens_per_minute))
        self.tokens -= tokens - estimate
        self.answered += 1
        self.answered_tokens += tokens

    def pause(self, now: float, seconds: float) -> None:
        """Start no request for ``seconds`` from now (a longer pause already running
        is kept)."""
        self.paused_until = max(self.paused_until, now + max(0.0, seconds))


@attrs.frozen
class RateLimiterStatistics:
    """What a :class:`RateLimiter` is doing.

    Attributes:
      waiting: Calls waiting for their turn now.
      started: Calls let through so far.
      delayed: Of those, the calls that had to wait.
      pauses: Server hints (``Retry-After``, ``x-ratelimit-*``) that paused the limiter.
      paused_until: ``trio.current_time()`` at which the current pause ends, or None.
      requests_available: Requests the bucket holds now (None without a request limit).
      tokens_available: Tokens the bucket holds now, negative in debt (None without a
        token limit).
    """

    waiting: int
    started: int
    delayed: int
    pauses: int
    paused_until: float | None
    requests_available: float | None
    tokens_available: float | None


@attrs.define(eq=False, init=False)
class RateLimiter:
    """One rate limit shared by every model call that goes through it (in any number of
    runs and pools): at most ``requests_per_minute`` calls and ``tokens_per_minute``
    tokens a minute, smoothed as token buckets holding ``burst`` requests (default 1:
    calls start ``60 / requests_per_minute`` seconds apart, however many wait) and one
    second's tokens.

    Calls wait their turn in FIFO order (a ``trio.Lock`` is fair); waiting is
    cancellable and a cancelled waiter takes nothing. A call is charged an estimate
    of its tokens when it starts (the mean ``usage.total_tokens`` of the answers so
    far, 0 before the first), settled against its real usage when it answers (given
    back when it fails): calls started before the first answer are not held back by
    the token limit, and a call bigger than the mean puts the bucket in debt, which
    later calls wait off. One answer is charged at most a minute's tokens, whatever
    usage the server reports. When a call fails with a
    :class:`~agentcore.TransientModelError` carrying ``retry_after`` (a 429 or 503
    with ``Retry-After``, or an exhausted ``x-ratelimit-*`` quota), the whole limiter
    pauses until then, capped at ``max_pause`` seconds, so other calls sharing it do
    not hit the same wall.

    It reads trio's clock from its first call on, so it may be made before
    ``trio.run`` (a specs file is read then), but serves one ``trio.run`` only. Use it
    through :class:`RateLimited`.
    """

    buckets: Buckets
    max_pause: float
    _lock: trio.Lock
    _changed: trio.Event
    _waiting: int
    _started: int
    _delayed: int
    _pauses: int

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        burst: float | None = None,
        max_pause: float = DEFAULT_MAX_PAUSE,
    ) -> None:
        _check_rate("requests_per_minute", requests_per_minute)
        _check_rate("tokens_per_minute", tokens_per_minute)
        _check_rate("burst", burst)
        if isinstance(max_pause, bool) or not isinstance(max_pause, int | float) or not (
            0 <= max_pause < math.inf
        ):
            raise ConfigurationError(
                f"max_pause must be a finite number of seconds, not {max_pause!r}"
            )
        if requests_per_minute is None and tokens_per_minute is None:
            raise ConfigurationError(
                "a RateLimiter needs requests_per_minute, tokens_per_minute or both"
            )
        if burst is not None and burst < 1:
            raise ConfigurationError(f"burst must be at least 1 request, not {burst!r}")
        buckets = Buckets.full(requests_per_minute, tokens_per_minute, request_burst=burst)
        self.__attrs_init__(
            buckets, float(max_pause), trio.Lock(), trio.Event(), 0, 0, 0, 0
        )

    def __repr__(self) -> str:
        b = self.buckets
        return (
            f"<RateLimiter requests_per_minute={b.requests_per_minute!r} "
            f"tokens_per_minute={b.tokens_per_minute!r} waiting={self._waiting}>"
        )

    async def _acquire(self) -> float:
        # Waits for the turn of one call and takes it, returning the tokens charged in
        # advance. A checkpoint; cancellable, and a cancelled wait takes nothing.
        self._waiting += 1
        try:
            async with self._lock:
                delayed = False
                while (wait := self.buckets.wait(trio.current_time())) > 0:
                    delayed = True
                    # Woken early when a pause or a charge changes the wait.
                    changed = self._changed
                    with trio.move_on_after(wait):
                        await changed.wait()
                estimate = self.buckets.take(trio.current_time())
                self._started += 1
                self._delayed += delayed
        finally:
            self._waiting -= 1
        return estimate

    def pause(self, seconds: float) -> None:
        """Start no call for ``seconds`` (at most ``max_pause``) from now, as a server
        asked. Not a checkpoint."""
        self.buckets.pause(trio.current_time(), min(seconds, self.max_pause))
        self._pauses += 1
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def call(
        self, fn: Callable[[], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        """Wait for a turn, then ``await fn()`` and charge its usage; a server's retry
        hint on a TransientModelError pauses the limiter. A checkpoint."""
        estimate = await self._acquire()
        tokens: int | None = None
        try:
            response = await fn()
            tokens = response.usage.total_tokens
        except TransientModelError as exc:
            if exc.retry_after is not None:
                self.pause(exc.retry_after)
            raise
        finally:
            self.buckets.settle(trio.current_time(), estimate, tokens)
            self._wake()
        return response

    def statistics(self) -> RateLimiterStatistics:
        """What the limiter is doing now. Not a checkpoint."""
        b = self.buckets
        now = trio.current_time()
        b.refill(now)
        return RateLimiterStatistics(
            waiting=self._waiting,
            started=self._started,
            delayed=self._delayed,
            pauses=self._pauses,
            paused_until=b.paused_until if b.paused_until > now else None,
            requests_available=b.requests if b.requests_per_minute is not None else None,
            tokens_available=b.tokens if b.tokens_per_minute is not None else None,
        )


@attrs.define(eq=False, init=False)
class RateLimited:
    """A :class:`~agentcore.ChatModel` whose calls wait on a :class:`RateLimiter`.

    ``RateLimited(model, requests_per_minute=..., tokens_per_minute=...)`` makes a new
    limiter; ``RateLimited(model, limiter=shared)`` shares one, so any number of
    models, agents, runs and pools count against the same budget. Use one object per
    provider account: every run that holds it (or a model made with its
    ``limiter``) waits its turn there.

    A run waiting its turn emits no event, so the wait counts as idle time for a
    ``Spec.idle_timeout``: an idle timeout shorter than the waits a limiter imposes
    ends the run.

    It streams (is a :class:`StreamingRateLimited`) when ``model`` does.

    Attributes:
      model: The model called.
      limiter: The limit it waits on.
    """

    model: ChatModel
    limiter: RateLimiter

    def __init__(
        self,
        model: ChatModel,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        burst: float | None = None,
        max_pause: float | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        if not callable(getattr(model, "complete", None)):
            raise ConfigurationError(
                f"RateLimited takes a ChatModel, and {model!r} has no complete()"
            )
        if limiter is None:
            limiter = RateLimiter(
                requests_per_minute,
                tokens_per_minute,
                burst=burst,
                max_pause=DEFAULT_MAX_PAUSE if max_pause is None else max_pause,
            )
        elif any(v is not None for v in (requests_per_minute, tokens_per_minute, burst, max_pause)):
            raise ConfigurationError(
                "RateLimited takes either a limiter or the limits of a new one, not both"
            )
        self.__attrs_init__(model, limiter)

    def __new__(cls, model: ChatModel, *_: Any, **__: Any) -> RateLimited:
        if cls is RateLimited and callable(getattr(model, "stream", None)):
            cls = StreamingRateLimited
        return object.__new__(cls)

    @property
    def name(self) -> str:
        """The wrapped model's name (see :func:`~agentcore.models.model_name`)."""
        return model_name(self.model)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The model's answer, after waiting for a turn. A checkpoint.

        Raises whatever the model raises.
        """
        return await self.limiter.call(lambda: self.model.complete(request))


class StreamingRateLimited(RateLimited):
    """The :class:`RateLimited` of a streaming model (``RateLimited(...)`` returns one
    then): a :class:`~agentcore.StreamingChatModel`."""

    __slots__ = ()

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse:
        """The model's streamed answer, after waiting for a turn. A checkpoint."""
        return await self.limiter.call(
            lambda: self.model.stream(request, on_delta)  # type: ignore[attr-defined]
        )
