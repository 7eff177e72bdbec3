"""A run that pauses in the pool (issue 20 item 2, pool side): TaskStatus.paused,
TaskPaused with the state, Pool.resume."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from agentcore import (
    CallStatus,
    PendingApproval,
    ResumeError,
    RunState,
)
from ledger import JsonlSink, verify
from subagent import (
    Spec,
    TaskPaused,
    TaskStatus,
    UnknownAgentError,
    open_pool,
)
from tests.agentcore._durable import gate, model
from tests.agentcore._durable import make_tool as tool
from tests.subagent._tree import register

Clock = trio.testing.MockClock
ROOT = Path(__file__).resolve().parents[2]
WORK = [[["c1", "write", 2], ["c2", "look", 1]]]


def spec(name: str = "w", agent_id: str = "") -> Spec:
    return Spec(name, model=model(WORK), tools=[tool("write", False), tool("look", True)],
                gate=gate("c1", None), agent_id=agent_id)


async def test_a_task_pauses_and_the_pool_resumes_it(autojump_clock: Clock) -> None:
    async with open_pool() as pool:
        pool.register(spec())
        task = await pool.submit("w", "go")
        with pytest.raises(TaskPaused) as info:
            await task.wait()
        assert str(info.value) == "task w/0001 paused for approval"
        assert task.status is TaskStatus.paused
        stats = pool.statistics()
        assert (stats.accepted, stats.paused, stats.finished, stats.running) == (1, 1, 0, 0)
        state = info.value.state
        assert [a.call_id for a in state.pending_approvals] == ["c1"]
        assert state.path == ("w/0001",)

        stored = RunState.from_json(state.to_json())
        stored.approve("c1", by="alice")
        again = await pool.resume(stored)
        result = await again.wait()
        assert again.path == ("w/0001",)  # the run's path: no live task has it
        assert result.output == "done after 1 turns"
        assert result.summary.tool_calls == 2
        assert trio.current_time() == 3.0
        stats = pool.statistics()
        assert (stats.accepted, stats.paused, stats.finished) == (2, 1, 1)


async def test_resume_binds_the_spec_by_agent_id(autojump_clock: Clock) -> None:
    async with open_pool() as pool:
        pool.register(spec("w", agent_id="writer"))
        task = await pool.submit("w", "go")
        with pytest.raises(TaskPaused) as info:
            await task.wait()
        state = info.value.state
        assert state.agent == "writer"
        with pytest.raises(ResumeError, match="has no answer yet"):
            await pool.resume(state)
        state.deny("c1", "no")
        pool.register(spec("v", agent_id="writer"))
        with pytest.raises(UnknownAgentError):
            await pool.resume(state)  # two specs have that agent id
        result = await (await pool.resume(state, name="w")).wait()
        assert result.summary.denied == 1


async def test_resume_with_a_missing_tool_is_refused(autojump_clock: Clock) -> None:
    async with open_pool() as pool:
        pool.register(spec())
        task = await pool.submit("w", "go")
        with pytest.raises(TaskPaused) as info:
            await task.wait()
        state = info.value.state
        state.approve("c1")
        pool.register(Spec("bare", model=model(WORK), agent_id="w2"))
        state.agent = "w2"
        with pytest.raises(ResumeError) as error:
            await pool.resume(state, name="bare")
        assert str(error.value) == (
            "tool 'write' of approved call 'c1' is not among this Agent's tools (none)"
        )




@pytest.mark.parametrize("approve", [True, False])
async def test_a_deferral_deep_in_a_tree_pauses_it_up_to_the_root(
    autojump_clock: Clock, tmp_path: Path, approve: bool
) -> None:
    log = tmp_path / "writes.log"
    ledger_path = tmp_path / "audit.jsonl"
    sink = JsonlSink(ledger_path)
    async with open_pool() as pool:
        register(pool, sink, log)
        task = await pool.submit("root", "start")
        with pytest.raises(TaskPaused) as info:
            await task.wait()
        assert pool.statistics().paused == 3
        assert [t.status for t in (task, task.children[0], task.children[0].children[0])] == [
            TaskStatus.paused] * 3
        state = info.value.state
        assert state.pending_approvals == (PendingApproval(
            ("root/0001", "mid/0002", "leaf/0003"), "c1", "write", '{"s": 0}', "ask a human"
        ),)
        assert [p.status for p in state.pending] == [CallStatus.delegated]
        assert [p.status for p in state.children[0].pending] == [CallStatus.delegated]
        assert not log.exists()

        stored = RunState.from_json(state.to_json())
        if approve:
            stored.approve("c1", by="alice")
        else:
            stored.deny("c1", "not now", by="bob")
        result = await (await pool.resume(stored)).wait()
        assert result.output == "got got done after 1 turns"
        assert log.exists() is approve
        if approve:
            assert log.read_text() == '{"s": 0}\n'  # the approved write ran once
        stats = pool.statistics()
        assert (stats.paused, stats.finished, stats.accepted) == (3, 3, 6)
    await sink.aclose()
    report = verify(ledger_path)
    assert report.ok, report.message
    kinds = [json.loads(line)["kind"] for line in ledger_path.read_text().splitlines()]
    assert kinds.count("run_resumed") == 3
    assert kinds.count("approval") == 1


def test_a_paused_tree_resumes_in_a_new_process(tmp_path: Path) -> None:
    log = tmp_path / "writes.log"
    ledger_path = tmp_path / "audit.jsonl"

    async def pause() -> RunState:
        sink = JsonlSink(ledger_path)
        try:
            async with open_pool() as pool:
                register(pool, sink, log)
                with pytest.raises(TaskPaused) as info:
                    await (await pool.submit("root", "start")).wait()
                return info.value.state
        finally:
            await sink.aclose()

    state = trio.run(pause, clock=trio.testing.MockClock(autojump_threshold=0))
    head = verify(ledger_path).head
    state.approve("c1", by="alice")
    (tmp_path / "state.json").write_text(state.to_json())
    subprocess.run(
        [sys.executable, "-m", "tests.subagent._tree", str(tmp_path / "state.json"),
         str(ledger_path), str(log), str(tmp_path / "out.txt")],
        cwd=ROOT, check=True, timeout=120,
    )
    assert (tmp_path / "out.txt").read_text() == "got got done after 1 turns"
    assert log.read_text() == '{"s": 0}\n'  # the approved write ran once
    report = verify(ledger_path, head=head)
    assert report.ok, report.message
    entries = [json.loads(line) for line in ledger_path.read_text().splitlines()]
    answers = ("approval", "run_resumed")
    assert [(e["kind"], e["path"]) for e in entries if e["kind"] in answers] == [
        ("run_resumed", ["root/0001"]),
        ("run_resumed", ["root/0001", "mid/0002"]),
        ("approval", ["root/0001", "mid/0002", "leaf/0003"]),
        ("run_resumed", ["root/0001", "mid/0002", "leaf/0003"]),
    ]
