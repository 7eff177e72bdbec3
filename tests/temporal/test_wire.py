"""The pieces that need no server: event wire form, heartbeat details, the workflow's
event buffer, the outbox, ledger file names."""

from __future__ import annotations

import json
import math
from typing import Any, cast

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import agentcore
from agentcore import GateDecision, Message, RunSummary, ToolCall, Usage
from subagent import Event, EventKind, LoopStall
from subagent.temporal import EventDecodeError, EventsLost, Heartbeat, events, ledger_name
from subagent.temporal._inputs import EventBatch, EventPage
from subagent.temporal._resume import MAX_HEARTBEAT_CHARS, last_heartbeat, start_state
from subagent.temporal._tree import MAX_PENDING, Link, Outbox
from subagent.temporal._wire import MAX_EVENT_BYTES, decode_event, encode_event
from subagent.temporal._workflow import MAX_PAGE, SubagentWorkflow

SUMMARY = RunSummary(2, 1, 0, 0, Usage(3, 4), agentcore.EndReason.stop, None, 1.5)
EVENTS = [
    Event(("a/0001",), EventKind.task_queued),
    Event(("a/0001", "b/0002"), agentcore.EventKind.tool_end, agentcore.Event(
        agentcore.EventKind.tool_end, run_id="r", agent_id="x", turn=2, text="t",
        message=Message("tool", "out", tool_call_id="c1", is_error=True),
        call=ToolCall("c1", "read_file", '{"path": "x"}'),
        decision=GateDecision(False, "no"), is_error=True, usage=Usage(1, 2),
        summary=SUMMARY, attempt=3,
    ), call_id="c0"),
    Event(("a/0001",), EventKind.task_finished, summary=SUMMARY, tree_usage=Usage(5, 6)),
    Event(("a/0001",), EventKind.result_delivered, child=("a/0001", "b/0002"), output="o",
          error="e"),
    Event((), EventKind.event_loop_blocked,
          stall=LoopStall(0.5, "sleepy", "c9", ("a/0001",), "stack")),
]


@pytest.mark.parametrize("event", EVENTS)
def test_events_round_trip(event: Event) -> None:
    assert decode_event(encode_event(event)) == event


@given(st.lists(st.text(max_size=8), max_size=4), st.text(max_size=30),
       st.sampled_from([*agentcore.EventKind, *EventKind]))
def test_any_path_and_text_round_trip(path: list[str], text: str, kind: Any) -> None:
    event = Event(tuple(path), kind, output=text, error=text)
    assert decode_event(encode_event(event)) == event


@pytest.mark.parametrize(("text", "message"), [
    ("[1]", "an event is not a JSON object"),
    ('{"path": ["a"], "kind": "nope"}', "unknown event kind 'nope'"),
    ('{"path": "a", "kind": "task_queued"}', "event field 'path' is not a list of strings"),
    ('{"path": [], "kind": "task_queued", "event": 3}', "event field 'event' is not an object"),
    ('{"path": [], "kind": "task_queued", "output": 3}',
     "an event does not fit its fields: Expected `str | null`, got `int`"),
    ('{"path": [], "kind": "task_queued", "summary": {"turns": "x"}}',
     "an event does not fit its fields: Expected `int`, got `str` - at `$.turns`"),
])
def test_bad_events_are_refused_by_name(text: str, message: str) -> None:
    with pytest.raises(EventDecodeError) as caught:
        decode_event(text)
    assert str(caught.value) == message


def test_an_event_over_the_cap_is_refused_before_parsing() -> None:
    with pytest.raises(EventDecodeError) as caught:
        decode_event("[" * (MAX_EVENT_BYTES + 1))
    assert str(caught.value) == f"an event of {MAX_EVENT_BYTES + 1} characters exceeds 1048576"


def test_deep_nesting_is_a_decode_error() -> None:
    with pytest.raises(EventDecodeError) as caught:
        decode_event("[" * 100_000)
    assert str(caught.value) == "an event is not valid JSON: nested too deeply"


def test_heartbeats_read_back_only_when_well_formed() -> None:
    beat = Heartbeat(2, 10, 3)
    assert last_heartbeat([beat.payload()]) == beat
    assert last_heartbeat([Heartbeat(1, 0, 0, "state").payload()]) == Heartbeat(1, 0, 0, "state")
    for details in ([], [beat.payload(), beat.payload()], ["x"],
                    [dict(beat.payload(), version=2)], [dict(beat.payload(), attempt=-1)],
                    [dict(beat.payload(), turns=True)], [dict(beat.payload(), state=3)],
                    [dict(beat.payload(), state="x" * (MAX_HEARTBEAT_CHARS + 1))]):
        assert last_heartbeat(details) is None
    # no state (sent before the first checkpoint): the attempt starts over
    assert start_state(beat) is None


def test_the_workflow_keeps_the_last_events_once_each() -> None:
    flow = SubagentWorkflow()
    flow._keep = 3
    flow.add_events(EventBatch(1, 0, ["e0", "e1"]))
    flow.add_events(EventBatch(1, 0, ["e0", "e1"]))  # a repeated signal
    flow.add_events(EventBatch(1, 2, ["lost order"]))  # out of order: dropped
    assert flow.events_since(0) == EventPage(0, ["e0", "e1"], 2, False)
    flow.add_events(EventBatch(1, 1, ["e2", "e3"]))
    flow.add_events(EventBatch(2, 0, ["e4"]))  # a second attempt numbers from 0
    assert flow.events_since(0) == EventPage(2, ["e2", "e3", "e4"], 5, False)
    assert flow.events_since(4) == EventPage(4, ["e4"], 5, False)
    assert flow.events_since(9) == EventPage(5, [], 5, False)
    assert flow.events_since(2, 1) == EventPage(2, ["e2"], 5, False)


def test_a_query_page_is_capped() -> None:
    flow = SubagentWorkflow()
    flow._keep = 2000
    flow.add_events(EventBatch(1, 0, [str(i) for i in range(1200)]))
    page = flow.events_since(0, 10_000)
    assert (page.first, len(page.events), page.total) == (0, MAX_PAGE, 1200)


def test_events_lost_names_where_to_resume() -> None:
    assert str(EventsLost(3, 10)) == (
        "events 3..9 are no longer kept by the workflow (it keeps the last ones only); "
        "resume from offset 10"
    )


def test_ledger_names_are_safe_and_distinct() -> None:
    assert ledger_name("boss/0001") == "boss_0001-" + ledger_name("boss/0001")[10:]
    assert ledger_name("../x") != ledger_name("__x")
    assert "/" not in ledger_name("../../etc/passwd")
    assert not ledger_name("..").startswith(".")
    assert len(ledger_name("x" * 500)) == 80 + 1 + 12 + 6


async def test_the_outbox_sends_in_order_and_drops_the_oldest_when_full() -> None:
    sent: list[EventBatch] = []
    fail = [True]

    async def send(batch: EventBatch) -> None:
        await trio.lowlevel.checkpoint()
        if fail[0]:
            raise ConnectionError("down")
        sent.append(batch)

    beats: list[dict[str, object]] = []
    outbox = Outbox(Link(send, beats.append, lambda: False, attempt=2))
    for i in range(MAX_PENDING + 5):
        outbox.put(Event((str(i),), EventKind.task_queued))
    assert await outbox.flush_once() is False
    assert (outbox.dropped, len(outbox.pending), outbox.seq) == (5, MAX_PENDING, 0)
    fail[0] = False
    while outbox.pending:
        assert await outbox.flush_once() is True
    assert [b.seq for b in sent] == list(range(16))
    assert {b.attempt for b in sent} == {2}
    paths = [json.loads(text)["path"][0] for b in sent for text in b.events]
    assert paths == [str(i) for i in range(5, MAX_PENDING + 5)]
    outbox.heartbeat()
    assert beats == [Heartbeat(2, MAX_PENDING, 0).payload()]


def test_a_heartbeat_version_must_be_the_integer() -> None:
    # True == 1 and 1.0 == 1: neither is the version this module wrote.
    beat = Heartbeat(2, 10, 3)
    for version in (True, 1.0):
        assert last_heartbeat([dict(beat.payload(), version=version)]) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"offset": -1}, "offset must be a whole number from 0, not -1"),
        ({"offset": True}, "offset must be a whole number from 0, not True"),
        ({"offset": 1.5}, "offset must be a whole number from 0, not 1.5"),
        ({"poll": 0}, "poll must be a positive number of seconds, not 0"),
        ({"poll": -1.0}, "poll must be a positive number of seconds, not -1.0"),
        ({"poll": math.nan}, "poll must be a positive number of seconds, not nan"),
    ],
)
async def test_events_refuses_a_bad_offset_or_poll_before_asking(
    kwargs: dict[str, Any], message: str
) -> None:
    # Checked before the client is used: none is needed.
    with pytest.raises(ValueError) as info:
        await anext(events(cast(Any, None), "wf", **kwargs))
    assert type(info.value) is ValueError
    assert str(info.value) == message
