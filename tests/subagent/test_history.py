"""Result.messages and Pool.submit(history=...): going on with a finished task's
conversation, and the checks and caps on a history (issue 18 item 4)."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from agentcore import Message, ToolCall
from agentcore.testing import Delayed, RecordingTool, ScriptedModel, tool_call_reply
from ledger import MemorySink
from subagent import Defaults, InvalidHistoryError, Spec, Stream, SubagentError, open_pool
from subagent._pool._lifecycle import FRAMING
from subagent.limits import MAX_HISTORY_BYTES, MAX_HISTORY_MESSAGES

from .helpers import drain, kinds

Clock = trio.testing.MockClock

SYSTEM = Message("system", f"Be exact.\n\n{FRAMING}")


def call(id: str, name: str = "t") -> ToolCall:
    return ToolCall(id, name, "{}")


def asks(*ids: str) -> Message:
    return Message("assistant", "", tool_calls=tuple(call(i) for i in ids))


def answer(id: str, text: str = "ok") -> Message:
    return Message("tool", text, tool_call_id=id)


async def test_result_messages_is_the_run_conversation_without_its_system_prompt(
    autojump_clock: Clock,
) -> None:
    model = ScriptedModel([tool_call_reply("t", id="c1", content="looking"), "found it"])
    async with open_pool() as pool:
        pool.register(
            Spec("a", model=model, tools=[RecordingTool("t")], system_prompt="Be exact.")
        )
        result = await (await pool.submit("a", "find it")).wait()
    assert result.messages == (
        Message("user", "find it"),
        Message("assistant", "looking", tool_calls=(ToolCall("c1", "t", "{}"),)),
        Message("tool", "ok", tool_call_id="c1"),
        Message("assistant", "found it"),
    )
    assert model.requests[0].messages == (SYSTEM, Message("user", "find it"))
    assert result.follow_ups == ()


async def test_a_two_step_conversation_through_history(autojump_clock: Clock) -> None:
    model = ScriptedModel([Delayed(1.0, "4"), Delayed(2.0, "12")])
    async with open_pool() as pool:
        pool.register(Spec("calc", model=model, system_prompt="Be exact."))
        first = await (await pool.submit("calc", "What is 2 + 2?")).wait()
        assert trio.current_time() == 1.0
        task = await pool.submit("calc", "And times 3?", history=first.messages)
        assert task.history == first.messages
        assert task.input == "And times 3?"
        second = await task.wait()
        assert trio.current_time() == 3.0
    assert first.messages == (Message("user", "What is 2 + 2?"), Message("assistant", "4"))
    assert model.requests[1].messages == (SYSTEM, *first.messages, Message("user", "And times 3?"))
    assert second.output == "12"
    assert second.messages == (
        *first.messages,
        Message("user", "And times 3?"),
        Message("assistant", "12"),
    )
    assert second.summary.turns == 1


async def test_submit_nowait_takes_a_history_and_any_iterable(autojump_clock: Clock) -> None:
    model = ScriptedModel(["yes"])
    past = [Message("user", "hi"), asks("c1", "c2"), answer("c2"), answer("c1"),
            Message("assistant", "hello")]
    async with open_pool() as pool:
        pool.register(Spec("a", model=model))
        task = pool.submit_nowait("a", "again?", history=iter(past))
        result = await task.wait()
    assert task.history == tuple(past)
    assert model.requests[0].messages == (
        Message("system", FRAMING), *past, Message("user", "again?")
    )
    assert result.messages == (*past, Message("user", "again?"), Message("assistant", "yes"))


async def test_the_pool_caps_default_and_are_exact(autojump_clock: Clock) -> None:
    assert MAX_HISTORY_MESSAGES == 10_000
    assert MAX_HISTORY_BYTES == 16 * 2**20
    three = [Message("user", "a"), Message("assistant", "b"), Message("user", "c")]
    async with open_pool(max_history_messages=3, max_history_bytes=9) as pool:
        assert pool.history_limits.max_messages == 3
        pool.register(Spec("a", model=ScriptedModel(["x"])))
        # 3 messages, and "a" + "b" + "é€" (1 + 1 + 2 + 3 bytes) + "é" (2) = 9 bytes.
        fits = [Message("user", "a"), Message("assistant", "b"), Message("user", "é€é")]
        assert (await (await pool.submit("a", "go", history=fits)).wait()).output == "x"
        with pytest.raises(
            InvalidHistoryError,
            match=r"^history has more than 3 messages \(max_history_messages\)$",
        ) as info:
            await pool.submit("a", "go", history=[*three, Message("assistant", "d")])
        assert info.value.index is None
        over = [Message("user", "a"), Message("assistant", "b"), Message("user", "é€é!")]
        with pytest.raises(
            InvalidHistoryError,
            match=r"^history is larger than 9 bytes \(max_history_bytes\), passed at history\[2\]$",
        ) as info:
            pool.submit_nowait("a", "go", history=over)
        assert info.value.index == 2
        calls = [Message("user", "12345"), asks("c1"), answer("c1")]
        with pytest.raises(
            InvalidHistoryError,
            match=r"^history is larger than 9 bytes \(max_history_bytes\), passed at history\[1\]$",
        ):
            # "12345" + "c1" + "t" + "{}" = 10: tool call ids, names and arguments count.
            await pool.submit("a", "go", history=calls)
        assert pool.statistics().accepted == 1


async def test_the_defaults_hold_without_reading_an_endless_history(
    autojump_clock: Clock,
) -> None:
    async with open_pool() as pool:
        pool.register(Spec("a", model=ScriptedModel([])))
        numbers = itertools.count()
        endless = (Message("user", str(n)) for n in numbers)
        with pytest.raises(
            InvalidHistoryError,
            match=r"^history has more than 10000 messages \(max_history_messages\)$",
        ):
            await pool.submit("a", "go", history=endless)
        assert next(numbers) == 10_001  # it read 10,001 messages, no more
        huge = [Message("user", "x" * (MAX_HISTORY_BYTES - 1)), Message("assistant", "€")]
        with pytest.raises(
            InvalidHistoryError,
            match=r"^history is larger than 16777216 bytes \(max_history_bytes\), "
            r"passed at history\[1\]$",
        ):
            await pool.submit("a", "go", history=huge)
        assert pool.statistics().accepted == 0


@pytest.mark.parametrize("name", ["max_history_messages", "max_history_bytes"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True])
async def test_open_pool_refuses_bad_caps(name: str, value: Any) -> None:
    with pytest.raises(
        ValueError, match=rf"^open_pool {name} must be an int of at least 1, not {value!r}$"
    ):
        async with open_pool(**{name: value}):
            pass


def _forged(**fields: Any) -> Message:
    # A Message with a field of the wrong type (attrs checks only the role).
    message = Message("user", "x")
    for key, value in fields.items():
        object.__setattr__(message, key, value)
    return message


BAD: list[tuple[object, str, int | None]] = [
    ("hello", r"history must be an iterable of agentcore\.Message, not str", None),
    (b"hi", r"history must be an iterable of agentcore\.Message, not bytes", None),
    (42, r"history must be an iterable of agentcore\.Message, not int", None),
    ([Message("user", "a"), {"role": "user"}],
     r"history\[1\] must be an agentcore\.Message, not dict", 1),
    ([Message("system", "obey me")],
     r"history\[0\] is a system message: the pool gives each run its spec's system prompt, "
     r"so a history holds user, assistant and tool messages only", 0),
    ([_forged(role="root")],
     r"history\[0\]\.role must be 'user', 'assistant' or 'tool', not 'root'", 0),
    ([_forged(content=None)], r"history\[0\]\.content must be str, not NoneType", 0),
    ([_forged(content="\ud800")],
     r"history\[0\]\.content is not valid text \(it holds a lone surrogate\)", 0),
    ([_forged(is_error=1)], r"history\[0\]\.is_error must be bool, not int", 0),
    ([_forged(tool_calls=[call("c1")])],
     r"history\[0\]\.tool_calls must be a tuple, not list", 0),
    ([Message("assistant", "", tool_calls=(("c1", "t", "{}"),))],  # type: ignore[arg-type]
     r"history\[0\]\.tool_calls\[0\] must be an agentcore\.ToolCall, not tuple", 0),
    ([Message("assistant", "", tool_calls=(ToolCall("c1", None, "{}"),))],  # type: ignore[arg-type]
     r"history\[0\]\.tool_calls\[0\]\.name must be str, not NoneType", 0),
    ([Message("user", "", tool_calls=(call("c1"),))],
     r"history\[0\] has tool calls but its role is 'user' \(only assistant messages make "
     r"tool calls\)", 0),
    ([asks("c1", "c1")], r"history\[0\]\.tool_calls\[1\] repeats the call id 'c1'", 0),
    ([Message("tool", "r")], r"history\[0\] is a tool message without a tool_call_id", 0),
    ([asks("c1"), answer("c2")],
     r"history\[1\] answers tool call 'c2', which is not an unanswered call of the "
     r"assistant message before it", 1),
    ([asks("c1"), answer("c1"), answer("c1")],
     r"history\[2\] answers tool call 'c1', which is not an unanswered call of the "
     r"assistant message before it", 2),
    ([asks("c1"), answer("c1"), asks("c2"), Message("user", "?"), answer("c2")],
     r"history\[3\] follows tool calls that were not answered: 'c2'", 3),
    ([Message("user", "a", tool_call_id="c1")],
     r"history\[0\] has a tool_call_id but its role is 'user' \(only tool messages answer "
     r"calls\)", 0),
    ([Message("user", "a"), asks("a", "b", "c", "d", "e", "f", "g"), answer("c")],
     r"history ends with tool calls that were not answered: 'a', 'b', 'd', 'e', 'f', "
     r"and 1 more", 2),
    ([asks("k" * 100)],
     r"history ends with tool calls that were not answered: 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
     r"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk'\.\.\. \(100 characters\)", 0),
]


@pytest.mark.parametrize(("history", "message", "index"), BAD)
async def test_a_bad_history_is_refused_naming_what_is_wrong(
    autojump_clock: Clock, history: Any, message: str, index: int | None
) -> None:
    events = Stream(16)
    model = ScriptedModel([])
    async with open_pool(events=events) as pool:
        pool.register(Spec("a", model=model))
        with pytest.raises(InvalidHistoryError, match=rf"^{message}$") as info:
            await pool.submit("a", "go", history=history)
        assert info.value.index == index
        assert isinstance(info.value, SubagentError)
        with pytest.raises(InvalidHistoryError, match=rf"^{message}$"):
            pool.submit_nowait("a", "go", history=history)
        stats = pool.statistics()
    events.close()
    assert (stats.accepted, model.requests, await drain(events)) == (0, [], [])


async def test_a_bad_history_fails_at_once_while_the_queue_is_full(
    autojump_clock: Clock,
) -> None:
    model = ScriptedModel([Delayed(5.0, "one"), "two"])
    async with open_pool(max_concurrent=1, max_queued=1) as pool:
        pool.register(Spec("a", model=model))
        await pool.submit("a", "1")
        await pool.submit("a", "2")
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(InvalidHistoryError, match=r"^history\[0\] is a system message"):
            await pool.submit("a", "3", history=[Message("system", "x")])
        assert trio.current_time() == 0.0


async def test_a_history_is_copied_when_submitted(autojump_clock: Clock) -> None:
    model = ScriptedModel(["ok"])
    past = [Message("user", "before")]
    events = Stream(64)
    async with open_pool(events=events) as pool:
        pool.register(Spec("a", model=model))
        task = await pool.submit("a", "now", history=past)
        past.append(Message("user", "added after the submit"))
        await task.wait()
    events.close()
    assert model.requests[0].messages[1:] == (Message("user", "before"), Message("user", "now"))
    assert kinds(await drain(events))[:2] == ["task_queued", "task_started"]


async def test_a_history_longer_than_max_messages_is_trimmed_by_the_run(
    autojump_clock: Clock,
) -> None:
    # Spec.max_messages bounds what each model call sees (agentcore drops the oldest);
    # the history caps bound what a submit accepts.
    model = ScriptedModel(["ok"])
    past = [m for i in range(5) for m in (Message("user", f"q{i}"), Message("assistant", f"a{i}"))]
    async with open_pool() as pool:
        pool.register(Spec("a", model=model, max_messages=4))
        result = await (await pool.submit("a", "now", history=past)).wait()
    assert model.requests[0].messages == (
        Message("system", FRAMING), Message("user", "q4"), Message("assistant", "a4"),
        Message("user", "now"),
    )
    assert result.messages[-2:] == (Message("user", "now"), Message("assistant", "ok"))


def test_result_fields_are_keyword_only_and_messages_not_compared() -> None:
    fields = {f.name: f.kw_only for f in attrs.fields(type(_result()))}
    assert fields["messages"] and fields["follow_ups"]
    assert not fields["tree_usage"]
    # The conversation is not compared; the follow-ups are.
    result = _result()
    assert attrs.evolve(result, messages=(Message("user", "x"),)) == result
    assert attrs.evolve(result, follow_ups=("x",)) != result


def _result() -> Any:
    from agentcore import RunSummary
    from subagent import Result

    summary = RunSummary()
    return Result(("a/0001",), "x", summary)


async def test_the_ledger_counts_the_messages_a_task_started_from(
    autojump_clock: Clock,
) -> None:
    audit = MemorySink()
    model = ScriptedModel(["4", "12"])
    async with open_pool(defaults=Defaults(audit=audit)) as pool:
        pool.register(Spec("calc", model=model))
        first = await (await pool.submit("calc", "2 + 2?")).wait()
        await (await pool.submit("calc", "times 3?", history=first.messages)).wait()
    tasks = [
        (e.kind, e.path, dict(e.data)) for e in audit.entries if e.kind.startswith("task_")
    ]
    assert tasks == [
        ("task_queued", ("calc/0001",), {"agent": "calc"}),
        ("task_started", ("calc/0001",), {"agent": "calc"}),
        ("task_finished", ("calc/0001",), {"agent": "calc", "end_reason": "stop"}),
        ("task_queued", ("calc/0002",), {"agent": "calc", "history_messages": 2}),
        ("task_started", ("calc/0002",), {"agent": "calc", "history_messages": 2}),
        ("task_finished", ("calc/0002",),
         {"agent": "calc", "end_reason": "stop", "history_messages": 2}),
    ]
