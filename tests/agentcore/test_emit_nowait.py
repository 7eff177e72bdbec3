"""Events a destination takes now (agentcore._events.taken_now, Run.emit_now): a sink
offering ``emit_nowait`` gets the run's events synchronously when it takes them, the
same events in the same order as through the awaited path; one that refuses (full,
cancelled) is awaited instead; observer hooks see each event after it; a lone agent_end
taken now is delivered even to a cancelled run."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from agentcore import Agent, EndReason, Event, EventKind, tool
from agentcore._events import taken_now
from agentcore.testing import Blocked, ScriptedModel, tool_call_reply

Clock = trio.testing.MockClock

W1 = [
    EventKind.agent_start, EventKind.turn_start, EventKind.model_request,
    EventKind.model_response, EventKind.tool_start, EventKind.gate_decision,
    EventKind.tool_end, EventKind.turn_start, EventKind.model_request,
    EventKind.model_response, EventKind.agent_end,
]


class Sink:
    """An EventSink with ``emit_nowait``: takes an event now unless ``refuse`` says
    no; records which path delivered each event."""

    def __init__(self, refuse: frozenset[EventKind] = frozenset()) -> None:
        self.refuse = refuse
        self.now: list[EventKind] = []
        self.awaited: list[EventKind] = []
        self.order: list[EventKind] = []

    def emit_nowait(self, event: Event) -> bool:
        if event.kind in self.refuse:
            return False
        self.now.append(event.kind)
        self.order.append(event.kind)
        return True

    async def __call__(self, event: Event) -> None:
        await trio.lowlevel.checkpoint()
        self.awaited.append(event.kind)
        self.order.append(event.kind)


@tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text


def agent(hooks: tuple[object, ...] = ()) -> Agent:
    model = ScriptedModel([tool_call_reply("echo", json.dumps({"text": "a"})), "done"])
    return Agent(model=model, tools=[echo], hooks=hooks)


async def test_a_sink_that_takes_every_event_now_is_never_awaited() -> None:
    sink = Sink()
    result = await agent().new_run("go", emit=sink).run()
    assert result.output == "done"
    assert sink.order == W1
    assert sink.now == W1
    assert sink.awaited == []


@pytest.mark.parametrize("refused", [EventKind.turn_start, EventKind.tool_end,
                                     EventKind.agent_end, EventKind.model_response])
async def test_a_refused_event_is_awaited_in_its_place(refused: EventKind) -> None:
    sink = Sink(frozenset({refused}))
    await agent().new_run("go", emit=sink).run()
    assert sink.order == W1
    assert set(sink.awaited) == {refused}
    assert len(sink.awaited) == W1.count(refused)


async def test_with_observer_hooks_the_destination_still_takes_events_first() -> None:
    log: list[str] = []

    class Observer:
        async def on_event(self, event: Event) -> None:
            log.append(f"hook:{event.kind}")

    class Logged(Sink):
        def emit_nowait(self, event: Event) -> bool:
            log.append(f"now:{event.kind}")
            return super().emit_nowait(event)

    sink = Logged()
    await agent((Observer(),)).new_run("go", emit=sink).run()
    # emit (awaited, for the hooks) hands each event to the destination now, then to
    # the hooks: the same order as through the awaited destination.
    assert log == [f"{side}:{kind}" for kind in W1 for side in ("now", "hook")]
    assert sink.awaited == []


async def test_a_lone_agent_end_is_taken_now_by_a_cancelled_run(autojump_clock: Clock) -> None:
    sink = Sink()
    run = Agent(model=ScriptedModel([Blocked("hi")])).new_run("x", emit=sink)
    with trio.move_on_after(3):
        await run.run()
    assert trio.current_time() == 3.0
    assert run.summary is not None
    assert run.summary.end_reason is EndReason.aborted
    assert sink.order == [EventKind.agent_start, EventKind.turn_start,
                          EventKind.model_request, EventKind.agent_end]
    assert sink.awaited == []


async def test_an_aborts_end_events_are_taken_now_in_order() -> None:
    # Two end events (interrupt_received, agent_end): the shielded end, whose emits
    # hand each to the destination now.
    sink = Sink()
    run = Agent(model=ScriptedModel([Blocked("hi")])).new_run("x", emit=sink)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run)
        await trio.testing.wait_all_tasks_blocked()
        run.abort("stop")
    assert sink.order == [EventKind.agent_start, EventKind.turn_start,
                          EventKind.model_request, EventKind.interrupt_received,
                          EventKind.agent_end]
    assert sink.awaited == []


async def test_taken_now_without_emit_nowait_takes_nothing() -> None:
    got: list[Event] = []

    async def plain(event: Event) -> None:
        got.append(event)

    assert not taken_now(plain, Event(EventKind.turn_start))
    assert got == []
    assert taken_now(Sink(), Event(EventKind.turn_start))
