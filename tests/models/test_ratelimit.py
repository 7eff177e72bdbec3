"""RateLimited and RateLimiter: exact turns under the mock clock, pauses on a server's
hints, and a 429 storm against a loopback server absorbed by a shared limiter."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from agentcore import (
    Agent,
    ConfigurationError,
    Message,
    ModelRequest,
    ModelResponse,
    RetryPolicy,
    StreamingChatModel,
    TransientModelError,
    Usage,
)
from agentcore.models import (
    RateLimited,
    RateLimiter,
    RateLimiterStatistics,
    StreamingRateLimited,
)
from agentcore.models._ratehints import parse_duration, retry_hint
from agentcore.models._ratelimit import Buckets
from agentcore.testing import Delayed, ScriptedModel, StreamingScriptedModel
from tests.models._support import Deltas

REQUEST = ModelRequest((Message("user", "hi"),))


@attrs.define
class Clocked:
    """A model that records when each call started, answering at once with ``tokens``
    output tokens, or raising what ``fail`` gives for the call's number."""

    tokens: int = 0
    fail: Callable[[int], BaseException | None] = lambda _: None
    starts: list[float] = attrs.Factory(list)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await trio.lowlevel.checkpoint()
        self.starts.append(trio.current_time())
        error = self.fail(len(self.starts))
        if error is not None:
            raise error
        return ModelResponse(Message("assistant", "ok"), usage=Usage(0, self.tokens))


async def calls_in_order(model: RateLimited, count: int) -> None:
    """``count`` concurrent calls, started in order (each parked before the next)."""
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(model.complete, REQUEST)
            await trio.testing.wait_all_tasks_blocked()


async def test_requests_per_minute_spaces_calls_exactly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    inner = Clocked()
    await calls_in_order(RateLimited(inner, requests_per_minute=60), 4)
    assert inner.starts == [0.0, 1.0, 2.0, 3.0]


async def test_a_burst_lets_that_many_calls_through_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    inner = Clocked()
    await calls_in_order(RateLimited(inner, requests_per_minute=120), 4)
    assert inner.starts == [0.0, 0.5, 1.0, 1.5]  # no burst by default
    inner = Clocked()
    limited = RateLimited(inner, requests_per_minute=120, burst=3)
    start = trio.current_time()
    await calls_in_order(limited, 5)
    assert [t - start for t in inner.starts] == [0.0, 0.0, 0.0, 0.5, 1.0]


async def test_tokens_are_charged_after_each_response_and_debt_is_waited_off(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # 600 tokens a minute = 10 a second, holding 10. Each call takes 0.1 s and uses 25
    # tokens. The first (estimated at 0) leaves a debt of 15 at 0.1, paid back 1.5 s
    # later. Then each call is charged 25 in advance when it starts: 2.5 s apart.
    inner = ScriptedModel(lambda _: Delayed(0.1, "ok"), usage=Usage(5, 20))
    limited = RateLimited(inner, tokens_per_minute=600)
    starts: list[float] = []

    async def call() -> None:
        await limited.complete(REQUEST)
        starts.append(round(trio.current_time() - 0.1, 9))

    await call()
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(call)
            await trio.testing.wait_all_tasks_blocked()
    assert starts == [0.0, 1.6, 4.1, 6.6]
    # The last call, charged 25 at 6.6, answered at 6.7 (1 token refilled).
    stats = limited.limiter.statistics()
    assert stats.tokens_available is not None and round(stats.tokens_available, 6) == -24.0
    assert attrs.evolve(stats, tokens_available=None) == RateLimiterStatistics(
        waiting=0, started=4, delayed=3, pauses=0, paused_until=None,
        requests_available=None, tokens_available=None,
    )


async def test_waiting_is_first_in_first_out_and_cancellable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    inner = Clocked()
    limited = RateLimited(inner, requests_per_minute=60)
    order: list[str] = []

    async def call(name: str, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            await limited.complete(REQUEST)
            order.append(name)

    async with trio.open_nursery() as nursery:
        scopes = [await nursery.start(call, name) for name in "abcd"]
        await trio.testing.wait_all_tasks_blocked()
        assert limited.limiter.statistics().waiting == 3
        scopes[1].cancel()  # b gives up its place: c takes its turn at 1, d at 2
    assert order == ["a", "c", "d"]
    assert inner.starts == [0.0, 1.0, 2.0]
    assert limited.limiter.statistics().started == 3


async def test_retry_after_pauses_every_call_sharing_the_limiter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = RateLimiter(requests_per_minute=600)  # a call every 0.1 s

    def first_fails(n: int) -> BaseException | None:
        return TransientModelError("HTTP 429", retry_after=5.0) if n == 1 else None

    a, b = Clocked(fail=first_fails), Clocked()
    failing, other = RateLimited(a, limiter=limiter), RateLimited(b, limiter=limiter)
    with pytest.raises(TransientModelError):
        await failing.complete(REQUEST)
    stats = limiter.statistics()
    assert (stats.pauses, stats.paused_until) == (1, 5.0)
    await other.complete(REQUEST)
    await failing.complete(REQUEST)
    assert (a.starts, b.starts) == ([0.0, 5.1], [5.0])


async def test_a_pause_holds_back_calls_already_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def fails_once(n: int) -> BaseException | None:
        return TransientModelError("HTTP 503", retry_after=1e9) if n == 1 else None

    inner = Clocked(fail=fails_once)
    limited = RateLimited(inner, requests_per_minute=60, max_pause=10.0)

    async def call() -> None:
        with contextlib.suppress(TransientModelError):
            await limited.complete(REQUEST)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(call)
    # The first call failed at 0 with a Retry-After of 31 years, capped at 10 s.
    assert inner.starts == [0.0, 10.0]


async def test_a_transient_error_without_a_hint_does_not_pause(
    autojump_clock: trio.testing.MockClock,
) -> None:
    inner = Clocked(fail=lambda n: TransientModelError("HTTP 500") if n == 1 else None)
    limited = RateLimited(inner, requests_per_minute=600)
    with pytest.raises(TransientModelError):
        await limited.complete(REQUEST)
    await limited.complete(REQUEST)
    assert inner.starts == [0.0, 0.1]
    assert limited.limiter.statistics().pauses == 0


async def test_runs_of_different_agents_share_one_limiter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = RateLimiter(requests_per_minute=30)  # one call every 2 s
    first, second = Clocked(), Clocked()
    agents = [Agent(model=RateLimited(m, limiter=limiter)) for m in (first, second)]
    async with trio.open_nursery() as nursery:
        for agent in agents * 2:
            nursery.start_soon(agent.run, "hi")
            await trio.testing.wait_all_tasks_blocked()
    assert (first.starts, second.starts) == ([0.0, 4.0], [2.0, 6.0])


async def test_a_streaming_model_stays_streaming(
    autojump_clock: trio.testing.MockClock,
) -> None:
    inner = StreamingScriptedModel(["hello", "again"], chunk=3)
    limited = RateLimited(inner, requests_per_minute=60)
    assert isinstance(limited, StreamingRateLimited)
    assert isinstance(limited, StreamingChatModel)
    deltas = Deltas()
    await limited.stream(REQUEST, deltas)
    await limited.stream(REQUEST, deltas)
    assert deltas == ["hel", "lo", "aga", "in"]
    assert trio.current_time() == 1.0
    plain = RateLimited(ScriptedModel([]), requests_per_minute=60)
    assert type(plain) is RateLimited and not hasattr(plain, "stream")
    assert plain.name == "ScriptedModel"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "a RateLimiter needs requests_per_minute, tokens_per_minute or both"),
        ({"requests_per_minute": 0}, "requests_per_minute must be a positive finite number, not 0"),
        ({"tokens_per_minute": float("nan")}, "tokens_per_minute must be a positive finite"),
        ({"requests_per_minute": True}, "requests_per_minute must be a number, not True"),
        ({"requests_per_minute": 60, "burst": 0.5}, "burst must be at least 1 request, not 0.5"),
        ({"requests_per_minute": 60, "max_pause": -1}, "max_pause must be a finite number"),
        ({"requests_per_minute": 60, "limiter": "x"}, "either a limiter or the limits"),
        ({"max_pause": 1, "limiter": "x"}, "either a limiter or the limits"),
    ],
)
async def test_bad_limits_are_configuration_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        RateLimited(ScriptedModel([]), **kwargs)


def test_bad_model_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="takes a ChatModel, and 3 has no complete"):
        RateLimited(3, requests_per_minute=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("2.5", 2.5),
        ("", None),
        ("1x", None),
        ("s", None),
        ("-3", None),
        ("nan", None),
        ("9" * 100, None),
        ("1970-01-01T00:00:00Z", 0.0),
    ],
)
def test_reset_durations(value: str, seconds: float | None) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "3", "x-ratelimit-remaining-requests": "0",
          "x-ratelimit-reset-requests": "20s"}, 3.0),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s",
          "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"}, 360.0),
        ({"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "1s"}, None),
        ({"anthropic-ratelimit-tokens-remaining": "0",
          "anthropic-ratelimit-tokens-reset": "1970-01-01T00:00:00Z"}, 0.0),
        ({"retry-after": "soon", "x-ratelimit-remaining-tokens": "0",
          "x-ratelimit-reset-tokens": "garbage"}, None),
        ({}, None),
    ],
)
def test_retry_hints_from_headers(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_hint(headers) == seconds


HEADER_NAMES = [
    "retry-after",
    "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
    "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset",
]


@given(st.dictionaries(
    st.sampled_from(HEADER_NAMES),
    st.one_of(st.text(max_size=80), st.sampled_from(["0", "1s", "6m0s", "-1", "1e400", "nan"])),
))
def test_any_headers_give_a_wait_or_none(headers: dict[str, str]) -> None:
    # Server headers are hostile: never an exception, never a negative or infinite wait.
    hint = retry_hint(headers)
    assert hint is None or 0 <= hint < math.inf


def test_buckets_refill_to_their_burst_and_settle_estimates() -> None:
    buckets = Buckets.full(60, 600)
    assert (buckets.request_burst, buckets.token_burst) == (1.0, 10.0)
    assert buckets.take(0.0) == 0.0  # nothing answered yet: no estimate
    buckets.settle(0.0, 0.0, 30)
    assert buckets.wait(0.0) == 2.0  # the token debt (20) is the longer wait
    assert buckets.wait(100.0) == 0.0
    assert (buckets.requests, buckets.tokens) == (1.0, 10.0)
    assert buckets.take(100.0) == 30.0
    assert buckets.tokens == -20.0
    buckets.settle(100.0, 30.0, None)  # failed: the estimate is given back
    assert (buckets.tokens, buckets.answered) == (10.0, 1)
    buckets.settle(100.0, 0.0, 10**5000)  # a hostile usage figure: a minute's worth
    assert (buckets.tokens, buckets.wait(100.0)) == (-590.0, 59.0)
    buckets.pause(100.0, 5.0)
    buckets.pause(100.0, 1.0)  # a shorter pause does not cut the running one
    assert buckets.paused_until == 105.0


@pytest.mark.slow
@given(st.data())
def test_no_window_admits_more_than_the_rate_allows(data: st.DataObject) -> None:
    # Random arrivals, some cancelled while waiting: calls start in arrival order, and
    # between the starts of calls i and j at most burst + rate * (t_j - t_i) start.
    rpm = data.draw(st.sampled_from([6.0, 60.0, 90.0, 600.0]), label="rpm")
    burst = data.draw(st.one_of(st.none(), st.integers(1, 5)), label="burst")
    arrivals = data.draw(st.lists(st.tuples(
        st.sampled_from([0.0, 0.05, 0.5, 3.0]), st.booleans()), min_size=1, max_size=25))

    async def main() -> None:
        inner = Clocked()
        limited = RateLimited(inner, requests_per_minute=rpm, burst=burst)
        done: list[int] = []

        async def call(index: int, patience: float | None) -> None:
            with trio.move_on_after(patience if patience is not None else math.inf):
                await limited.complete(REQUEST)
                done.append(index)

        async with trio.open_nursery() as nursery:
            for index, (gap, impatient) in enumerate(arrivals):
                await trio.sleep(gap)
                nursery.start_soon(call, index, 0.7 if impatient else None)
                await trio.testing.wait_all_tasks_blocked()
        starts = inner.starts
        assert done == sorted(done) and len(starts) == len(done)
        assert [i for i, (_, impatient) in enumerate(arrivals) if not impatient] == [
            i for i in done if not arrivals[i][1]]
        capacity = burst if burst is not None else 1
        for i, first in enumerate(starts):
            for j in range(i, len(starts)):
                assert j - i + 1 <= capacity + (starts[j] - first) * rpm / 60 + 1e-6
        assert limited.limiter.statistics().waiting == 0

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_an_adapter_429_with_ratelimit_headers_pauses_the_limiter(api: Any) -> None:
    from agentcore.models import OpenAIChatModel
    from tests.models._fakeapi import json_reply

    api.replies.append(json_reply(
        {"error": {"message": "Rate limit reached"}}, 429,
        [("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "20s"),
         ("x-ratelimit-remaining-tokens", "10"), ("x-ratelimit-reset-tokens", "6m0s")],
    ))
    base = OpenAIChatModel("gpt-test", api_key="sk-test", base_url=api.url + "/v1")
    limited = RateLimited(base, requests_per_minute=60, max_pause=30)
    with pytest.raises(TransientModelError) as info:
        await limited.complete(REQUEST)
    assert str(info.value) == "OpenAI API error (HTTP 429): Rate limit reached"
    assert info.value.retry_after == 20.0  # the exhausted quota's reset, not the other
    stats = limited.limiter.statistics()
    assert stats.pauses == 1 and stats.paused_until is not None


# --- a 429 storm against a loopback server ---------------------------------------

#: The server's own limit: one request per this many seconds (real time).
SERVER_INTERVAL = 0.1
RUNS = 8


@pytest.mark.slow
def test_a_shared_limiter_absorbs_a_429_storm() -> None:
    # Real sockets, real clock: RUNS agents start at once against a server that allows
    # one request per 0.1 s and answers others 429 with Retry-After. Alone they storm
    # it; sharing a limiter at half the server's rate they mostly do not.
    unlimited = trio.run(_storm, False)
    limited = trio.run(_storm, True)
    print(f"429s sent: {unlimited} without the limiter, {limited} with it")
    assert unlimited >= RUNS - 1
    assert limited < unlimited / 2


async def _storm(share_limiter: bool) -> int:
    from agentcore.models import OpenAIChatModel
    from tests.models._fakeapi import FakeAPI, Reply, json_reply, sse, sse_reply

    ok = sse_reply([
        sse({"id": "c", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"content": "done"}, "finish_reason": "stop"}]}),
        sse("[DONE]"),
    ])
    busy = json_reply({"error": {"message": "rate limited"}}, 429,
                      [("Retry-After", str(SERVER_INTERVAL))])

    class Gatekeeper(list[Reply]):
        """FakeAPI's reply queue, deciding each reply when it is taken: a server
        rate limit of one request per SERVER_INTERVAL."""

        next_free = 0.0
        refused = 0

        def pop(self, index: Any = -1) -> Reply:
            now = trio.current_time()
            if now >= self.next_free:
                self.next_free = now + SERVER_INTERVAL
                return ok
            self.refused += 1
            return busy

    replies = Gatekeeper()
    fake = FakeAPI(replies=replies)
    retry = RetryPolicy(max_attempts=50, base_delay=SERVER_INTERVAL, max_delay=1.0)
    limiter = RateLimiter(requests_per_minute=0.5 * 60 / SERVER_INTERVAL)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, fake.handle, 0,
                                                host="127.0.0.1"))
        fake.port = listeners[0].socket.getsockname()[1]
        base = OpenAIChatModel("gpt-test", api_key="sk-test", base_url=fake.url + "/v1")
        model = RateLimited(base, limiter=limiter) if share_limiter else base
        results: list[str] = []

        async def run() -> None:
            result = await Agent(model=model, retry=retry).run("hi")
            results.append(result.output)

        with trio.fail_after(60):
            async with trio.open_nursery() as runs:
                for _ in range(RUNS):
                    runs.start_soon(run)
        nursery.cancel_scope.cancel()
    assert results == ["done"] * RUNS
    return replies.refused
