"""Issue 20's round-trip property: pause at a random deferred call, store the state
as JSON, read it back (in a new process), answer it, resume: the same conversation,
the same events after the pause and a ledger that verifies, as a run whose gate
answered in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import Event, GateDecision, RunState
from ledger import JsonlSink, verify

from ._durable import Workload, agent, event_value, gate, message_value

ROOT = Path(__file__).resolve().parents[2]
LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"


@st.composite
def workloads(draw: st.DrawFn) -> tuple[Workload, str, GateDecision]:
    turns = draw(st.integers(1, 4))
    workload: Workload = [
        [
            [f"c{t}_{k}", draw(st.sampled_from(["look", "write"])), draw(st.integers(0, 3))]
            for k in range(draw(st.integers(1, 4)))
        ]
        for t in range(turns)
    ]
    writes = [c[0] for turn in workload for c in turn if c[1] == "write"]
    if not writes:
        workload[-1].append([f"c{turns - 1}_w", "write", draw(st.integers(0, 3))])
        writes.append(workload[-1][-1][0])
    target = draw(st.sampled_from(writes))
    answer = draw(st.sampled_from([
        GateDecision(True, "approved"),
        GateDecision(True, "looks fine"),
        GateDecision(False, "not today"),
    ]))
    return workload, target, answer


def _run(workload: Workload, target: str, answer: GateDecision | None,
         ledger: Path) -> tuple[Any, list[Event]]:
    events: list[Event] = []

    async def emit(e: Event) -> None:
        events.append(e)

    async def main() -> Any:
        sink = JsonlSink(ledger)
        try:
            return await agent(workload, gate(target, answer), sink).run(
                "go", run_id="r1", emit=emit
            )
        finally:
            await sink.aclose()

    result = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return result, events


def _entries(ledger: Path) -> list[tuple[str, str | None]]:
    return [(e["kind"], e["call_id"]) for e in map(json.loads, ledger.read_text().splitlines())]


def _resume_in_process(workload: Workload, state_text: str, ledger: Path) -> dict[str, Any]:
    from ._durable import _resume

    return trio.run(_resume, workload, state_text, str(ledger),
                    clock=trio.testing.MockClock(autojump_threshold=0))


def _resume_in_child(workload: Workload, state_text: str, ledger: Path) -> dict[str, Any]:
    folder = ledger.parent
    (folder / "workload.json").write_text(json.dumps(workload))
    (folder / "state.json").write_text(state_text)
    subprocess.run(
        [sys.executable, "-m", "tests.agentcore._durable", str(folder / "workload.json"),
         str(folder / "state.json"), str(ledger), str(folder / "out.json")],
        cwd=ROOT, check=True, timeout=120,
    )
    value: dict[str, Any] = json.loads((folder / "out.json").read_text())
    return value


def same_order(a: list[Any], b: list[Any], call_of: Any) -> None:
    """``a`` and ``b`` hold the same items, in the same order for each call and for
    the items of no call: a turn's read-only calls run concurrently, and trio
    schedules runnable tasks in a random order, so only those orders are fixed."""
    a = json.loads(json.dumps(a))
    b = json.loads(json.dumps(b))
    assert sorted(map(json.dumps, a)) == sorted(map(json.dumps, b))
    for call in {call_of(x) for x in a}:
        assert [x for x in a if call_of(x) == call] == [x for x in b if call_of(x) == call]


def _event_call(value: list[Any]) -> str | None:
    call: str | None = value[6] and value[6][0]
    return call


def _entry_call(value: list[Any]) -> str | None:
    call: str | None = value[1]
    return call


def check_round_trip(workload: Workload, target: str, answer: GateDecision,
                     child: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base, base_events = _run(workload, target, answer, folder / "base.jsonl")
        paused, paused_events = _run(workload, target, None, folder / "paused.jsonl")
        assert str(paused.summary.end_reason) == "paused"
        assert paused.output == ""
        state = paused.state
        assert state is not None
        [pending] = state.pending_approvals
        assert (pending.call_id, pending.tool, pending.reason) == (target, "write", "ask a human")
        head = verify(folder / "paused.jsonl").head

        # The human reads the stored state, answers, stores it again.
        answered = RunState.from_json(state.to_json())
        if answer.allowed:
            answered.approve(target, reason=answer.reason, by="alice")
        else:
            answered.deny(target, answer.reason, by="bob")
        text = answered.to_json()
        resume = _resume_in_child if child else _resume_in_process
        resumed = resume(workload, text, folder / "paused.jsonl")

        assert resumed["output"] == base.output
        assert resumed["messages"] == [message_value(m) for m in base.messages]
        base_values = [event_value(e) for e in base_events]
        k = next(i for i, e in enumerate(base_events)
                 if str(e.kind) == "gate_decision" and e.call and e.call.id == target)
        paused_values = [event_value(e) for e in paused_events]
        same_order(paused_values[:k], base_values[:k], _event_call)
        assert paused_values[k][0] == "gate_decision"
        assert paused_values[k][7] == [False, "ask a human", True]
        assert paused_values[k + 1][0] == "agent_end"
        assert paused_values[k + 1][9][4] == "paused"
        assert len(paused_values) == k + 2
        assert resumed["events"][0][:5] == ["agent_start", "r1", "worker", base_events[k].turn,
                                            "go"]
        same_order(resumed["events"][1:], base_values[k:], _event_call)

        # One chain across the pause, continuing from the head the pause left.
        report = verify(folder / "paused.jsonl", head=head)
        assert report.ok, report.message
        base_entries = _entries(folder / "base.jsonl")
        j = base_entries.index(("gate_decision", target))
        entries = _entries(folder / "paused.jsonl")
        assert entries[j:j + 4] == [
            ("gate_decision", target), ("run_end", None), ("approval", target),
            ("run_resumed", None),
        ]
        same_order(entries[:j], base_entries[:j], _entry_call)
        same_order(entries[j + 4:], base_entries[j:], _entry_call)


@pytest.mark.slow
@settings(max_examples=2000 if LONG else 100)
@given(workloads())
def test_round_trip_in_process(case: tuple[Workload, str, GateDecision]) -> None:
    check_round_trip(*case, child=False)


@pytest.mark.slow
@settings(max_examples=200 if LONG else 8)
@given(workloads())
def test_round_trip_in_a_new_process(case: tuple[Workload, str, GateDecision]) -> None:
    check_round_trip(*case, child=True)
