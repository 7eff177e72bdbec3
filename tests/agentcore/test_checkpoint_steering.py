"""Steering waiting in a run's inbox at a checkpoint is part of the checkpointed
state (issue 20, "Other limits"): a run recovered from that checkpoint reads it;
follow-ups come back too. The stored field is bounded and checked like the rest."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from agentcore import (
    Agent,
    Checkpoint,
    CheckpointKind,
    EventKind,
    FunctionTool,
    Message,
    RunState,
    RunStateError,
    current_run,
)
from agentcore._run._checkpoint import snapshot
from agentcore._steering import InboxMessage
from agentcore.limits import MAX_STATE_STEERING
from agentcore.lowlevel import recover_calls
from agentcore.testing import ScriptedModel
from tests.agentcore._durable import model
from tests.agentcore.test_runstate import body_of, envelope

Clock = trio.testing.MockClock
WORK = [[["c1", "poke", 0]], [["c2", "poke", 0]]]


async def _poke(arguments: str) -> str:
    # A tool that steers its own run (as a user would while the call runs).
    run = current_run()
    assert run is not None
    if json.loads(arguments)["s"] == 0 and run.state.turn == 1:
        run.steer("also check the logs")
        run.follow_up("then write the report")
    await trio.lowlevel.checkpoint()
    return "poked"


def agent(taken: list[Checkpoint] | None, reply: ScriptedModel | None = None) -> Agent:
    async def keep(point: Checkpoint) -> None:
        await trio.lowlevel.checkpoint()
        assert taken is not None
        taken.append(point)

    return Agent(
        model=reply or model(WORK), agent_id="worker",
        tools=[FunctionTool("poke", "poke", {"type": "object"}, _poke, read_only=True)],
        checkpoint=None if taken is None else keep,
    )


async def test_steering_waiting_at_a_checkpoint_reaches_the_recovered_run(
    autojump_clock: Clock,
) -> None:
    taken: list[Checkpoint] = []
    await agent(taken).run("go")
    # The turn boundary after c1: the steering sent during c1 waits in the inbox.
    [point] = [p for p in taken if p.kind is CheckpointKind.turn and p.state.turn == 1]
    assert point.state.steering == ["also check the logs"]
    assert point.state.follow_ups == ["then write the report"]
    stored = RunState.from_json(point.state.to_json())
    assert (stored.steering, stored.preempting) == (["also check the logs"], 1)
    assert stored.follow_ups == ["then write the report"]

    recover_calls(stored, (), (), {}, "worker@3")
    events: list[tuple[str, str]] = []

    async def seen(event: object) -> None:
        kind = getattr(event, "kind", None)
        if kind is EventKind.steering_injected:
            events.append((str(kind), getattr(event, "text", "")))

    answer = ScriptedModel(lambda request: Message(
        "assistant", "read: " + request.messages[-1].content))
    run = agent(None, answer).new_run_from(stored, emit=seen)
    result = await run.run()
    assert result.output == "read: also check the logs"
    assert [(m.role, m.content) for m in result.messages[-3:]] == [
        ("tool", "poked"), ("user", "also check the logs"),
        ("assistant", "read: also check the logs")]
    assert events == [("steering_injected", "also check the logs")]
    assert result.follow_ups == ("then write the report",)


def _with_steering(texts: list[str]) -> RunState:
    state = RunState.begin([Message("user", "go")], run_id="r", agent="worker", input="go")
    state.phase = state.phase.running
    for text in texts:
        state.put(InboxMessage(Message("user", text), EventKind.steering_injected, text))
    return snapshot(state)


def test_a_state_without_steering_is_written_as_before() -> None:
    body = body_of(_with_steering([]))
    assert b"steering" not in body
    assert RunState.from_json(envelope(body)).steering == []
    assert b'"steering":["a","b"]' in body_of(_with_steering(["a", "b"]))


@pytest.mark.parametrize(("steering", "message"), [
    (b'"x"', "not a RunState: bad state: Expected `array`, got `str` - at `$.steering`"),
    (b'[1]', "not a RunState: bad state: Expected `str`, got `int` - at `$.steering[0]`"),
    (b'[' + b",".join([b'"s"'] * (MAX_STATE_STEERING + 1)) + b']',
     "not a RunState: bad state: Expected `array` of length <= 1000 - at `$.steering`"),
])
def test_bad_steering_is_refused(steering: bytes, message: str) -> None:
    body = body_of(_with_steering(["a"])).replace(b'["a"]', steering)
    with pytest.raises(RunStateError) as info:
        RunState.from_json(envelope(body))
    assert str(info.value) == message


def test_more_steering_than_the_bound_cannot_be_stored() -> None:
    state = _with_steering(["s"] * (MAX_STATE_STEERING + 1))
    with pytest.raises(RunStateError) as info:
        state.to_json()
    assert str(info.value) == (
        "more than 1000 steering messages wait in the run's inbox (MAX_STATE_STEERING): "
        "its state cannot be stored")
    assert MAX_STATE_STEERING == 1000
