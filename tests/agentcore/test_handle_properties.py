"""Property test (issue 5, acceptance): random steer / follow-up / interrupt / abort at random
virtual times against a scripted model making random read-only and mutating tool calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio
import trio.testing
from hypothesis import event, given, settings
from hypothesis import strategies as st

from agentcore import (
    Agent,
    EndReason,
    EventKind,
    Message,
    ModelRequest,
    RunEndedError,
    RunResult,
    ToolCall,
)
from agentcore.testing import Delayed, ScriptedModel, ScriptItem
from tests.agentcore._support import Recorder


class Tracker:
    """Shared bookkeeping of the tools: concurrency and starts after an abort."""

    def __init__(self) -> None:
        self.active_read = 0
        self.active_write = 0
        self.max_read = 0
        self.overlap = False
        self.aborted = False
        self.started_after_abort = 0
        self.started: list[str] = []


class Tool:
    description = "a test tool"
    def __init__(self, name: str, tracker: Tracker, delay: float) -> None:
        self.parameters: Mapping[str, Any] = {"type": "object"}
        self.name = name
        self.read_only = name == "read"
        self.tracker = tracker
        self.delay = delay

    async def execute(self, arguments: str) -> str:
        t = self.tracker
        t.started.append(arguments)
        if t.aborted:
            t.started_after_abort += 1
        if self.read_only:
            t.active_read += 1
            t.max_read = max(t.max_read, t.active_read)
        else:
            t.active_write += 1
        if t.active_write > 1 or (t.active_write and t.active_read):
            t.overlap = True
        try:
            await trio.sleep(self.delay)
        finally:
            if self.read_only:
                t.active_read -= 1
            else:
                t.active_write -= 1
        return f"done {arguments}"


turns = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.5, 1.0]),
        st.lists(st.sampled_from(["read", "write"]), max_size=5),
    ),
    min_size=1,
    max_size=5,
)
actions = st.lists(
    st.tuples(st.integers(0, 24).map(lambda q: q / 4),
              st.sampled_from(["steer", "follow_up", "interrupt", "abort"])),
    max_size=6,
).map(sorted)


def well_formed(messages: tuple[Message, ...]) -> None:
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message.role != "tool", f"tool message without its call at {i}"
        i += 1
        if message.role == "assistant" and message.tool_calls:
            for call in message.tool_calls:
                assert messages[i].role == "tool"
                assert messages[i].tool_call_id == call.id
                i += 1


@settings(max_examples=200, deadline=None)
@given(
    script=turns,
    plan=actions,
    max_turns=st.integers(1, 4),
    max_parallel=st.integers(1, 3),
    read_delay=st.sampled_from([0.0, 0.5, 1.0]),
    write_delay=st.sampled_from([0.0, 0.5, 1.0]),
)
def test_random_control_of_a_run(
    script: list[tuple[float, list[str]]],
    plan: list[tuple[float, str]],
    max_turns: int,
    max_parallel: int,
    read_delay: float,
    write_delay: float,
) -> None:
    tracker = Tracker()
    calls_made = iter(range(1000))

    def reply(request: ModelRequest) -> ScriptItem:
        n = next(calls_made)
        if not request.tools or n >= len(script):
            return Delayed(0.25, f"answer {n}")
        delay, names = script[n]
        message = Message("assistant", f"turn {n}", tool_calls=tuple(
            ToolCall(f"t{n}_{k}", name, f'{{"c": "t{n}_{k}"}}') for k, name in enumerate(names)
        ))
        return Delayed(delay, message)

    record = Recorder()
    events = record.events

    agent = Agent(
        model=ScriptedModel(reply),
        tools=[Tool("read", tracker, read_delay), Tool("write", tracker, write_delay)],
        max_turns=max_turns,
        max_parallel_tools=max_parallel,
    )
    run = agent.new_run("go", emit=record)
    results: list[RunResult] = []
    steered: list[str] = []
    followed: list[str] = []
    interrupted = aborted = False
    interrupted_at: int | None = None

    async def main() -> None:
        nonlocal interrupted, aborted, interrupted_at
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                results.append(await run.run())

            nursery.start_soon(go)
            for k, (at, action) in enumerate(plan):
                await trio.sleep_until(at)
                if action == "steer":
                    try:
                        run.steer(f"s{k}")
                        steered.append(f"s{k}")
                    except RunEndedError:
                        assert run.ended
                elif action == "follow_up":
                    try:
                        run.follow_up(f"f{k}")
                        followed.append(f"f{k}")
                    except RunEndedError:
                        assert run.ended
                elif action == "interrupt":
                    if not run.ended and not interrupted:
                        interrupted, interrupted_at = True, len(events)
                    run.interrupt()
                else:
                    if not run.ended:
                        aborted = True
                        tracker.aborted = True
                    run.abort()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    # The run ended exactly once, with the right reason.
    assert len(results) == 1
    result = results[0]
    kinds = [e.kind for e in events]
    assert kinds.count(EventKind.agent_start) == 1
    assert kinds.count(EventKind.agent_end) == 1
    assert kinds[0] is EventKind.agent_start
    assert kinds[-1] is EventKind.agent_end
    reason = result.summary.end_reason
    event(str(reason))
    if aborted:
        assert reason is EndReason.aborted
    elif interrupted:
        assert reason is EndReason.interrupted
    else:
        last = result.messages[-1]
        expected = EndReason.max_turns if last.role == "tool" else EndReason.stop
        assert reason is expected
        assert result.summary.turns <= max_turns

    # No tool started after the abort; concurrency stayed within its bounds.
    assert tracker.started_after_abort == 0
    assert tracker.max_read <= max_parallel
    assert not tracker.overlap

    # Every call that was not skipped has exactly one result; skipped ones none.
    started = [e.call.id for e in events if e.kind is EventKind.tool_start and e.call]
    ended = [e.call.id for e in events if e.kind is EventKind.tool_end and e.call]
    skipped = [e.call.id for e in events if e.kind is EventKind.tool_skipped and e.call]
    assert len(set(started)) == len(started)
    assert len(set(ended)) == len(ended)
    assert set(ended) <= set(started)
    assert not set(skipped) & set(started)
    if reason is not EndReason.aborted:
        assert set(ended) == set(started)
    assert len(tracker.started) == len(set(tracker.started))

    # Once interrupted, no tool call starts.
    if interrupted_at is not None:
        assert EventKind.tool_start not in kinds[interrupted_at:]

    # The history is well formed, also after a rollback.
    well_formed(result.messages)

    # Each steering message was read exactly once or came back as a follow-up.
    injected = [e.text for e in events if e.kind is EventKind.steering_injected]
    assert sorted(injected + [f for f in result.follow_ups if f.startswith("s")]) == steered
    assert [f for f in result.follow_ups if f.startswith("f")] == followed
    queued = [e.text for e in events if e.kind is EventKind.follow_up_queued]
    assert queued == list(result.follow_ups)
