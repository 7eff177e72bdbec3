"""Context budget and recovery (issue 5.4, 5.5): compression, context/length/transient retries."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentcore import (
    Agent,
    ConfigurationError,
    ContextTooLongError,
    EndReason,
    EventKind,
    Message,
    ModelResponse,
    RetryPolicy,
    ToolCall,
    TransientModelError,
    Usage,
    count_chars,
    estimate_tokens,
)
from agentcore._history import drop_oldest_half, fit
from agentcore._steering import LENGTH_RECOVERY
from agentcore.testing import RecordingTool, ScriptedModel, tool_call_reply
from tests.agentcore._support import Recorder

Clock = trio.testing.MockClock
EXACT = RetryPolicy(jitter=0)

SYS = Message("system", "s")


def u(text: str) -> Message:
    return Message("user", text)


def a(text: str) -> Message:
    return Message("assistant", text)


def asks(*ids: str) -> Message:
    return Message("assistant", "", tool_calls=tuple(ToolCall(i, "t", "{}") for i in ids))


def res(call_id: str) -> Message:
    return Message("tool", "r", tool_call_id=call_id)


# -- the pure budget functions ----------------------------------------------------------


def test_counters() -> None:
    message = Message("assistant", "abcd", tool_calls=(ToolCall("1", "read", '{"p": 1}'),))
    assert count_chars(message) == 4 + 4 + 8
    assert estimate_tokens(message) == 4 + 4
    assert estimate_tokens(u("")) == 4


def test_fit_within_bounds_changes_nothing() -> None:
    history = [SYS, u("1"), a("2")]
    assert fit(history, max_messages=3, limit=None, counter=count_chars) is None
    assert fit(history, max_messages=None, limit=3, counter=count_chars) is None


def test_fit_drops_the_oldest_but_keeps_system_and_tool_results_with_their_call() -> None:
    history = [SYS, u("q"), asks("x", "y"), res("x"), res("y"), a("mid"), u("more"), a("end")]
    assert fit(history, max_messages=6, limit=None, counter=count_chars) == [
        SYS, a("mid"), u("more"), a("end")
    ]
    dropped_q = history[:1] + history[2:]
    assert fit(history, max_messages=7, limit=None, counter=count_chars) == dropped_q
    assert fit(history, max_messages=None, limit=8, counter=count_chars) == [
        SYS, u("more"), a("end")
    ]


def test_fit_keeps_the_newest_unit_even_over_the_limit() -> None:
    history = [SYS, u("a" * 50), asks("x"), res("x")]
    assert fit(history, max_messages=1, limit=None, counter=count_chars) == [
        SYS, asks("x"), res("x")
    ]
    assert fit([SYS, u("a" * 50)], max_messages=None, limit=1, counter=count_chars) is None


def test_drop_oldest_half() -> None:
    history = [SYS, u("1"), a("2"), u("3"), asks("x"), res("x"), u("4")]
    assert drop_oldest_half(history) == [SYS, asks("x"), res("x"), u("4")]
    assert drop_oldest_half([SYS, u("only")]) is None


# -- the budget in the loop ----------------------------------------------------------------


async def test_the_loop_compresses_before_each_model_call(autojump_clock: Clock) -> None:
    rec = Recorder()
    tool = RecordingTool("t")
    script = [tool_call_reply("t", id=f"c{i}") for i in range(3)] + ["done"]
    model = ScriptedModel(script)
    agent = Agent(model=model, tools=[tool], system_prompt="s", max_messages=4, max_turns=5)
    result = await agent.run("go", emit=rec)
    assert result.output == "done"
    assert [len(r.messages) for r in model.requests] == [2, 4, 3, 3]
    assert model.requests[2].messages == (
        SYS, tool_call_reply("t", id="c1"), Message("tool", "ok", tool_call_id="c1")
    )
    assert [e.text for e in rec.of(EventKind.context_compressed)] == [
        "dropped 3 of 6 messages", "dropped 2 of 5 messages"
    ]
    compressed = rec.kinds.index("context_compressed")
    assert rec.kinds[compressed - 1 : compressed + 2] == [
        "turn_start", "context_compressed", "model_request"
    ]
    assert len(result.messages) == 4


async def test_history_limit_with_a_token_counter(autojump_clock: Clock) -> None:
    model = ScriptedModel([tool_call_reply("t", id="c"), "second"])
    agent = Agent(
        model=model, tools=[RecordingTool("t")], history_limit=12, history_counter=estimate_tokens
    )
    await agent.run("x" * 8)  # 6 tokens, then the call (5) and its result (5)
    assert model.requests[0].messages == (u("x" * 8),)
    assert model.requests[1].messages == (
        tool_call_reply("t", id="c"), Message("tool", "ok", tool_call_id="c")
    )


async def test_a_count_within_max_messages_still_fits_the_history_limit(
    autojump_clock: Clock,
) -> None:
    # Both bounds: the messages are fewer than max_messages, the size is over the limit.
    model = ScriptedModel([tool_call_reply("t", id="c"), "second"])
    agent = Agent(
        model=model, tools=[RecordingTool("t")], max_messages=100, history_limit=12,
        history_counter=estimate_tokens,
    )
    await agent.run("x" * 8)
    assert model.requests[1].messages == (
        tool_call_reply("t", id="c"), Message("tool", "ok", tool_call_id="c")
    )


def test_limits_must_be_positive() -> None:
    model = ScriptedModel([])
    with pytest.raises(ConfigurationError, match=r"^Agent max_messages must be positive, not 0$"):
        Agent(model=model, max_messages=0)
    with pytest.raises(ConfigurationError, match=r"^Agent max_parallel_tools must be positive"):
        Agent(model=model, max_parallel_tools=0)
    with pytest.raises(ConfigurationError, match=r"^RetryPolicy max_attempts must be positive"):
        RetryPolicy(max_attempts=0)


# -- context too long --------------------------------------------------------------------


async def test_context_too_long_drops_the_oldest_half_and_retries(autojump_clock: Clock) -> None:
    rec = Recorder()
    model = ScriptedModel([ContextTooLongError("too long"), "ok"])
    history = [u("old"), a("older answer")]
    result = await Agent(model=model, system_prompt="s").run("now", emit=rec, history=history)
    assert result.output == "ok"
    assert model.requests[1].messages == (SYS, a("older answer"), u("now"))
    assert rec.kinds == [
        "agent_start", "turn_start", "model_request", "context_compressed", "retry",
        "model_request", "model_response", "agent_end",
    ]
    assert rec.events[3].text == "dropped 1 of 4 messages"
    assert rec.events[4].text == "ContextTooLongError: too long; retrying shorter"
    assert rec.events[4].attempt == 1


async def test_context_too_long_gives_up_after_two_retries(autojump_clock: Clock) -> None:
    history = [u(str(i)) for i in range(8)]
    errors = [ContextTooLongError("too long")] * 3
    model = ScriptedModel([*errors, "never"])
    result = await Agent(model=model).run("now", history=history)
    assert result.summary.end_reason is EndReason.error
    assert result.summary.error == "ContextTooLongError: too long"
    assert [len(r.messages) for r in model.requests] == [9, 5, 3]


async def test_context_too_long_with_nothing_to_drop_fails(autojump_clock: Clock) -> None:
    model = ScriptedModel([ContextTooLongError("too long"), "never"])
    result = await Agent(model=model, system_prompt="s").run("now")
    assert result.summary.end_reason is EndReason.error
    assert len(model.requests) == 1


# -- length ------------------------------------------------------------------------------


def cut(text: str) -> ModelResponse:
    return ModelResponse(a(text), "length", Usage(1, 1))


async def test_a_truncated_answer_is_retried_with_a_recovery_prompt(autojump_clock: Clock) -> None:
    rec = Recorder()
    model = ScriptedModel([cut("a very lo"), "short"], usage=Usage(1, 1))
    result = await Agent(model=model).run("q", emit=rec)
    assert result.output == "short"
    assert result.messages == (u("q"), a("a very lo"), u(LENGTH_RECOVERY), a("short"))
    assert result.summary.usage == Usage(2, 2)
    assert result.summary.turns == 1
    assert rec.kinds == [
        "agent_start", "turn_start", "model_request", "model_response", "retry",
        "model_request", "model_response", "agent_end",
    ]
    assert rec.events[4].text == (
        "the response was cut off (finish_reason length); asking for a shorter one"
    )


async def test_truncated_tool_calls_are_dropped_before_the_retry(autojump_clock: Clock) -> None:
    garbled = Message("assistant", "let me", tool_calls=(ToolCall("c", "t", '{"p'),))
    model = ScriptedModel([ModelResponse(garbled, "length"), "fine"])
    result = await Agent(model=model, tools=[RecordingTool("t")]).run("q")
    assert result.messages[1] == a("let me")
    assert result.output == "fine"


async def test_after_two_length_retries_the_answer_is_used(autojump_clock: Clock) -> None:
    model = ScriptedModel([cut("1"), cut("2"), cut("3"), "never"])
    result = await Agent(model=model).run("q")
    assert result.output == "3"
    assert result.summary.end_reason is EndReason.stop
    assert len(model.requests) == 3


# -- transient errors ----------------------------------------------------------------------


async def test_transient_errors_back_off_exponentially(autojump_clock: Clock) -> None:
    rec = Recorder()
    model = ScriptedModel([TransientModelError("503"), TransientModelError("429"), "ok"])
    result = await Agent(model=model, retry=EXACT).run("q", emit=rec)
    assert result.output == "ok"
    assert result.summary.duration == 3.0
    retries = rec.of(EventKind.retry)
    assert [(e.text, e.attempt) for e in retries] == [
        ("TransientModelError: 503; retrying in 1s", 1),
        ("TransientModelError: 429; retrying in 2s", 2),
    ]
    assert rec.kinds == [
        "agent_start", "turn_start", "model_request", "retry", "model_request", "retry",
        "model_request", "model_response", "agent_end",
    ]


async def test_transient_errors_give_up_after_three_attempts(autojump_clock: Clock) -> None:
    model = ScriptedModel([TransientModelError("503")] * 3 + ["never"])
    result = await Agent(model=model, retry=EXACT).run("q")
    assert result.summary.end_reason is EndReason.error
    assert result.summary.error == "TransientModelError: 503"
    assert result.summary.duration == 3.0
    assert len(model.requests) == 3


async def test_retry_after_is_honoured(autojump_clock: Clock) -> None:
    rec = Recorder()
    model = ScriptedModel([TransientModelError("429", retry_after=7.5), "ok"])
    result = await Agent(model=model, retry=EXACT).run("q", emit=rec)
    assert result.summary.duration == 7.5
    assert rec.of(EventKind.retry)[0].text == "TransientModelError: 429; retrying in 7.5s"


async def test_jitter_uses_the_policy_random_source(autojump_clock: Clock) -> None:
    policy = RetryPolicy(jitter=0.25, random=lambda: 1.0)
    model = ScriptedModel([TransientModelError("503")] * 2 + ["ok"])
    result = await Agent(model=model, retry=policy).run("q")
    assert result.summary.duration == 1.25 + 2.5
    assert RetryPolicy(jitter=0.25, random=lambda: 0.0).delay(1) == 0.75
    assert RetryPolicy(base_delay=10, max_delay=15, jitter=0).delay(3) == 15


async def test_an_abort_during_backoff(autojump_clock: Clock) -> None:
    model = ScriptedModel([TransientModelError("503"), "never"])
    run = Agent(model=model, retry=EXACT).new_run("q")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run)
        await trio.sleep(0.5)
        run.abort()
    assert run.summary is not None
    assert run.summary.end_reason is EndReason.aborted
    assert run.summary.duration == 0.5
    assert len(model.requests) == 1
