"""Properties of the history check (subagent._specs._history): any history is either
accepted whole or refused with InvalidHistoryError, by a rule stated here apart; and
the messages of every Result a real pool gives back are accepted as a history."""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from agentcore import Message, ToolCall
from agentcore.testing import Delayed, RecordingTool, ScriptedModel
from subagent import InvalidHistoryError, Spec, open_pool
from subagent._specs._history import DEFAULT_LIMITS, HistoryLimits, check_history

IDS = st.sampled_from(["a", "b", "c", "é"])

messages = st.builds(
    Message,
    role=st.sampled_from(["user", "assistant", "tool", "system"]),
    content=st.text(max_size=3),
    tool_calls=st.lists(st.builds(ToolCall, IDS, st.just("t"), st.just("{}")), max_size=3),
    tool_call_id=st.one_of(st.none(), IDS),
)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    # Mostly well-formed turns (answers in any order), then at most two random edits:
    # drop a message (or a tool answer), swap two, or put a random one in.
    history: list[Message] = []
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):
            history.append(Message(draw(st.sampled_from(["user", "assistant"])), "x"))
            continue
        ids = draw(st.lists(IDS, max_size=3, unique=True))
        history.append(
            Message("assistant", "", tool_calls=tuple(ToolCall(i, "t", "{}") for i in ids))
        )
        history += [Message("tool", "r", tool_call_id=i) for i in draw(st.permutations(ids))]
    for _ in range(draw(st.integers(0, 2))):
        edit = draw(st.sampled_from(["drop", "drop an answer", "swap", "insert"]))
        answers = [i for i, m in enumerate(history) if m.role == "tool"]
        if edit == "drop an answer" and answers:
            del history[draw(st.sampled_from(answers))]
        elif edit == "insert":
            history.insert(draw(st.integers(0, len(history))), draw(messages))
        elif history:
            i = draw(st.integers(0, len(history) - 1))
            j = draw(st.integers(0, len(history) - 1))
            if edit == "drop":
                del history[i]
            else:
                history[i], history[j] = history[j], history[i]
    return history


def fits(history: list[Message]) -> bool:
    # The rule, stated as a walk over the turns: every assistant message with calls
    # is followed by exactly one answer to each of them, and nothing else, before
    # the next user or assistant message (and before the end).
    i = 0
    while i < len(history):
        m = history[i]
        if m.role not in ("user", "assistant") or m.tool_call_id is not None:
            return False
        if m.tool_calls and m.role != "assistant":
            return False
        wanted = sorted(c.id for c in m.tool_calls)
        if len(set(wanted)) != len(wanted):
            return False
        got = []
        i += 1
        while i < len(history) and history[i].role == "tool":
            t = history[i]
            if t.tool_calls:
                return False
            got.append(t.tool_call_id)
            i += 1
        if sorted(got, key=str) != wanted:
            return False
    return True


def size(history: list[Message]) -> int:
    total = 0
    for m in history:
        total += len(m.content.encode()) + len((m.tool_call_id or "").encode())
        for c in m.tool_calls:
            total += len(c.id.encode()) + len(c.name) + len(c.arguments)
    return total


@given(
    st.one_of(histories(), histories(), histories(), st.lists(messages, max_size=8)),
    st.one_of(st.just(DEFAULT_LIMITS), st.builds(HistoryLimits, st.integers(1, 16),
                                                  st.integers(1, 60))),
)
def test_a_history_is_accepted_exactly_when_it_fits(
    history: list[Message], limits: HistoryLimits
) -> None:
    max_messages, max_bytes = limits.max_messages, limits.max_bytes
    expected = fits(history) and len(history) <= max_messages and size(history) <= max_bytes
    try:
        accepted = check_history(history, limits)
    except InvalidHistoryError as error:
        assert not expected, str(error)
        assert error.index is None or 0 <= error.index < len(history)
    else:
        assert expected
        assert accepted == tuple(history)


@given(
    replies=st.lists(st.integers(0, 3), max_size=4),
    steer_at=st.one_of(st.none(), st.integers(0, 6)),
    interrupt_at=st.one_of(st.none(), st.integers(0, 6)),
    max_messages=st.one_of(st.none(), st.integers(1, 6)),
)
def test_the_messages_of_every_result_are_a_valid_history(
    replies: list[int],
    steer_at: int | None,
    interrupt_at: int | None,
    max_messages: int | None,
) -> None:
    # Runs with parallel tool calls, failing tools, steering, a graceful interrupt and
    # a trimmed conversation: whatever the run ends with is a history a submit takes.
    async def main() -> None:
        script: list[object] = []
        for number, calls in enumerate(replies):
            ids = tuple(ToolCall(f"c{number}.{k}", f"t{k}", "{}") for k in range(calls))
            script.append(Delayed(1.0, Message("assistant", f"r{number}", tool_calls=ids)))
        script += [Delayed(1.0, "final"), Delayed(1.0, "summary"), "again"]
        # An answering tool, a failing one, a slow one.
        tools = [
            RecordingTool("t0"),
            RecordingTool("t1", RuntimeError("broken")),
            RecordingTool("t2", delay=0.5),
        ]
        model = ScriptedModel(script)  # type: ignore[arg-type]
        async with open_pool() as pool:
            spec = Spec("a", model=model, tools=tools)
            if max_messages is not None:
                spec = Spec("a", model=model, tools=tools, max_messages=max_messages)
            pool.register(spec)
            task = await pool.submit("a", "go")
            async with trio.open_nursery() as nursery:
                if steer_at is not None:

                    async def steer(at: int) -> None:
                        await trio.sleep(at)
                        if not task.done:
                            task.steer("look again")

                    nursery.start_soon(steer, steer_at)
                if interrupt_at is not None:

                    async def interrupt(at: int) -> None:
                        await trio.sleep(at)
                        task.interrupt()

                    nursery.start_soon(interrupt, interrupt_at)
            result = await task.wait()
            assert check_history(result.messages, DEFAULT_LIMITS) == result.messages
            again = await (await pool.submit("a", "more", history=result.messages)).wait()
            if max_messages is None:
                assert again.messages[: len(result.messages)] == result.messages

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
