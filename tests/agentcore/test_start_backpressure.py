"""agent_start takes ordinary backpressure (issue 15): a run cancelled while its
destination does not take agent_start stops at once and delivers neither agent_start
nor agent_end (SPEC 3.5: start and end pair up); one whose agent_start was taken
delivers its agent_end even when it is cancelled."""

from __future__ import annotations

import trio
import trio.testing

from agentcore import Agent, EndReason, Event, EventKind
from agentcore.testing import Blocked, ScriptedModel

Clock = trio.testing.MockClock


async def test_a_cancel_while_agent_start_waits_delivers_neither(autojump_clock: Clock) -> None:
    delivered: list[EventKind] = []

    async def never_takes_the_start(event: Event) -> None:
        if event.kind is EventKind.agent_start:
            await trio.sleep_forever()
        delivered.append(event.kind)

    run = Agent(model=ScriptedModel(["hi"])).new_run("x", emit=never_takes_the_start)
    # Steering it never read would be reported at its end (follow_up_queued): a run
    # that delivered no agent_start delivers none of its end either.
    run.steer("later")
    with trio.move_on_after(3) as scope:
        await run.run()
    assert scope.cancelled_caught
    # Not held for end_timeout: the run ends when its caller's deadline passes.
    assert trio.current_time() == 3.0
    assert delivered == []
    assert run.summary is not None
    assert run.summary.end_reason is EndReason.aborted


async def test_a_cancel_after_agent_start_was_taken_delivers_agent_end(
    autojump_clock: Clock,
) -> None:
    delivered: list[EventKind] = []

    async def record(event: Event) -> None:
        delivered.append(event.kind)

    run = Agent(model=ScriptedModel([Blocked("hi")])).new_run("x", emit=record)
    with trio.move_on_after(3):
        await run.run()
    assert trio.current_time() == 3.0
    assert delivered == [
        EventKind.agent_start, EventKind.turn_start, EventKind.model_request,
        EventKind.agent_end,
    ]
