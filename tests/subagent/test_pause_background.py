"""A tree that pauses with a background child (``wait: false``) not yet delivered
(issue 20 item 1): the child is running, paused or ended-unread at the pause; its
state or result nests in the root's RunState, survives JSON (and a new process), and
on resume its result is delivered exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from agentcore import BackgroundChild, EndReason, ResumeError, RunState
from ledger import JsonlSink, verify
from subagent import TaskPaused, open_pool
from tests.subagent._bgparts import STARTED
from tests.subagent._bgtree import register

Clock = trio.testing.MockClock
ROOT = Path(__file__).resolve().parents[2]


async def _pause(case: str, tmp_path: Path) -> tuple[RunState, list[str]]:
    sink = JsonlSink(tmp_path / "audit.jsonl")
    log = tmp_path / "writes.log"
    try:
        async with open_pool() as pool:
            register(pool, sink, log, case)
            task = await pool.submit("root", "go")
            with pytest.raises(TaskPaused) as info:
                await task.wait()
            assert trio.current_time() == 5.0
            kinds = [str(t.status) for t in (task, *task.children)]
    finally:
        await sink.aclose()
    return info.value.state, kinds


def _kinds(path: Path) -> list[str]:
    return [json.loads(line)["kind"] for line in path.read_text().splitlines()]


@pytest.mark.parametrize("case", ["running", "ended", "paused"])
async def test_a_background_child_is_part_of_the_paused_state(
    autojump_clock: Clock, tmp_path: Path, case: str
) -> None:
    state, statuses = await _pause(case, tmp_path)
    [child] = state.children
    assert [str(p.status) for p in state.pending] == (
        ["done"] if case == "paused" else ["deferred"])
    if case == "ended":
        # Ended at t=1 while root ran its tools: its result is kept, unread.
        assert statuses == ["paused", "finished"]
        assert child.background == BackgroundChild(
            "start-bg", "bg",
            '[subagent result] {"agent": "bg", "path": ["root/0001", "bg/0002"], '
            '"output": "bg done: slept"}',
            "bg done: slept", None,
        )
        assert child.messages == []
        assert child.summary is not None and child.summary.end_reason is EndReason.stop
    else:
        # Running (paused after its slow call) or paused by its own gate.
        assert statuses == ["paused", "paused"]
        assert child.background == BackgroundChild("start-bg", "bg")
        assert child.paused
        assert [m.role for m in child.messages] == ["system", "user", "assistant"]
        # Its slow call finished before it paused (its result kept as done).
        assert [str(p.status) for p in child.pending] == (
            ["done"] if case == "running" else ["deferred"])
    assert child.path == ("root/0001", "bg/0002")
    approvals = [(a.path, a.call_id) for a in state.pending_approvals]
    assert approvals == ([(("root/0001", "bg/0002"), "b1")] if case == "paused"
                         else [(("root/0001",), "w1")])
    text = state.to_json()
    assert json.loads(text)["version"] == 2
    again = RunState.from_json(text)
    assert again.to_json() == text
    assert again.children[0].background == child.background


EXPECTED = {
    # case: (the delivered result's path, the root's conversation after the pause)
    # (a fresh pool: the resumed root is root/0001 again, its resumed child bg/0002)
    "running": (["root/0001", "bg/0002"], ["slept", "write written"]),
    "ended": (["root/0001", "bg/0002"], ["slept", "write written"]),
    "paused": (["root/0001", "bg/0002"], ["slept", "", "1 result arrived (they follow as "
                                                       "messages)"]),
}


@pytest.mark.parametrize("case", ["running", "ended", "paused"])
async def test_pause_json_resume_delivers_the_background_result_once(
    autojump_clock: Clock, tmp_path: Path, case: str
) -> None:
    state, _ = await _pause(case, tmp_path)
    stored = RunState.from_json(state.to_json())
    [approval] = stored.pending_approvals
    stored.approve(approval.call_id, by="alice")
    ledger_path = tmp_path / "audit.jsonl"
    sink = JsonlSink(ledger_path)
    log = tmp_path / "writes.log"
    try:
        async with open_pool() as pool:
            register(pool, sink, log, case)
            task = await pool.resume(stored)
            result = await task.wait()
            assert trio.current_time() == 6.0
            stats = pool.statistics()
    finally:
        await sink.aclose()
    path, middle = EXPECTED[case]
    output = "bg done: bwrite written" if case == "paused" else "bg done: slept"
    assert result.output == f"root got {output}"
    contents = [m.content for m in result.messages]
    assert contents == [
        "go", "", STARTED, "", *middle,
        '[subagent result] ' + json.dumps({"agent": "bg", "path": path, "output": output}),
        f"root got {output}",
    ]
    assert log.read_text() == ("bwrite" if case == "paused" else "write") + ' {"s": 0}\n'
    kinds = _kinds(ledger_path)
    assert kinds.count("result_delivered") == 1
    assert kinds.count("task_orphaned") == 0
    # A running or paused child resumes as a background child of the resumed root.
    assert (stats.accepted, stats.finished, stats.paused) == (
        (1, 1, 0) if case == "ended" else (2, 2, 0))
    verify(ledger_path)


def test_a_paused_tree_with_a_background_child_resumes_in_a_new_process(
    tmp_path: Path,
) -> None:
    async def pause() -> RunState:
        return (await _pause("paused", tmp_path))[0]

    state = trio.run(pause, clock=trio.testing.MockClock(autojump_threshold=0))
    state.approve("b1", by="alice")
    state_path = tmp_path / "state.json"
    state_path.write_text(state.to_json())
    out = tmp_path / "out.txt"
    subprocess.run(
        [sys.executable, "-m", "tests.subagent._bgtree", "paused", str(state_path),
         str(tmp_path / "audit.jsonl"), str(tmp_path / "writes.log"), str(out)],
        cwd=ROOT, check=True, timeout=120,
    )
    assert out.read_text() == "root got bg done: bwrite written"
    assert (tmp_path / "writes.log").read_text() == 'bwrite {"s": 0}\n'
    kinds = _kinds(tmp_path / "audit.jsonl")
    assert kinds.count("result_delivered") == 1
    assert kinds.count("run_resumed") == 2
    verify(tmp_path / "audit.jsonl")


async def test_agent_resume_alone_refuses_background_children(
    autojump_clock: Clock, tmp_path: Path
) -> None:
    from agentcore import Agent
    from tests.subagent._bgtree import root_model

    state, _ = await _pause("ended", tmp_path)
    state.approve("w1")
    agent = Agent(model=root_model("ended"), agent_id="root")
    with pytest.raises(ResumeError) as info:
        await agent.resume(state)
    assert str(info.value) == (
        "this RunState has 1 background subagent(s) not yet delivered: "
        "resume it with subagent's Pool.resume"
    )


async def test_a_queued_background_child_is_paused_before_its_first_model_call(
    autojump_clock: Clock, tmp_path: Path
) -> None:
    # One slot: bg waits in the queue while root runs; root's pause frees the slot,
    # bg starts and pauses at once (asked before its run was made).
    sink = JsonlSink(tmp_path / "audit.jsonl")
    log = tmp_path / "writes.log"
    try:
        async with open_pool(max_concurrent=1) as pool:
            register(pool, sink, log, "running")
            task = await pool.submit("root", "go")
            with pytest.raises(TaskPaused) as info:
                await task.wait()
            assert trio.current_time() == 1.0
            state = info.value.state
            [child] = state.children
            assert child.background == BackgroundChild("start-bg", "bg")
            assert (child.turn, child.pending, [m.role for m in child.messages]) == (
                0, [], ["system", "user"])
            stored = RunState.from_json(state.to_json())
            stored.approve("w1")
            result = await (await pool.resume(stored)).wait()
    finally:
        await sink.aclose()
    assert result.output == "root got bg done: slept"
    assert log.read_text() == 'write {"s": 0}\n'
    assert _kinds(tmp_path / "audit.jsonl").count("result_delivered") == 1
