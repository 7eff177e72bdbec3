"""Every event carries ``time``: wall-clock seconds since the epoch, taken when it is made."""

from __future__ import annotations

import time

import pytest
import trio
import trio.testing

import agentcore
from subagent import Event, EventKind, Spec, Stream, open_pool

from .helpers import CountingModel, drain

#: The epoch second the pinned wall clock starts at (virtual time 0).
EPOCH = 1_800_000_000.0


@pytest.fixture
def pinned_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the wall clock ``EPOCH`` plus trio's (virtual) time."""
    monkeypatch.setattr(time, "time", lambda: EPOCH + trio.current_time())


def test_agentcore_event_time_is_taken_when_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: 12.5)
    assert agentcore.Event(agentcore.EventKind.agent_start).time == 12.5
    assert agentcore.Event(agentcore.EventKind.agent_start, time=3.0).time == 3.0


def test_time_is_not_part_of_equality() -> None:
    a = agentcore.Event(agentcore.EventKind.turn_start, "r", time=1.0)
    b = agentcore.Event(agentcore.EventKind.turn_start, "r", time=2.0)
    assert a == b
    assert hash(a) == hash(b)
    assert Event(("a",), EventKind.task_queued, time=1.0) == Event(
        ("a",), EventKind.task_queued, time=2.0
    )


def test_a_run_event_keeps_the_time_of_the_agentcore_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inner = agentcore.Event(agentcore.EventKind.agent_start, time=7.0)
    monkeypatch.setattr(time, "time", lambda: 9.0)
    assert Event(("a",), inner.kind, inner).time == 7.0
    assert Event(("a",), EventKind.task_started).time == 9.0
    assert Event(("a",), inner.kind, inner, time=8.0).time == 8.0


@pytest.mark.usefixtures("pinned_wall_clock")
async def test_events_of_a_task_carry_the_moment_they_happened(
    autojump_clock: trio.testing.MockClock,
) -> None:
    stream = Stream(64)
    async with open_pool(events=stream) as pool:
        pool.register(Spec("a", model=CountingModel(delay=2.0)))
        await trio.sleep(1.0)
        await (await pool.submit("a", "x")).wait()
    stream.close()
    events = await drain(stream)
    assert [(str(e.kind), e.time - EPOCH) for e in events] == [
        ("task_queued", 1.0),
        ("task_started", 1.0),
        ("agent_start", 1.0),
        ("turn_start", 1.0),
        ("model_request", 1.0),
        ("model_response", 3.0),
        ("agent_end", 3.0),
        ("task_finished", 3.0),
    ]
    assert all(e.event.time == e.time for e in events if e.event is not None)


def test_time_crosses_the_temporal_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    from subagent.temporal._wire import decode_event, encode_event

    inner = agentcore.Event(agentcore.EventKind.tool_start, "r", time=5.25)
    for event in (Event(("a",), EventKind.task_queued, time=4.5),
                  Event(("a",), inner.kind, inner)):
        monkeypatch.setattr(time, "time", lambda: 99.0)
        decoded = decode_event(encode_event(event))
        assert (decoded.time, decoded.event and decoded.event.time) == (
            event.time, event.event and event.event.time
        )
