"""A background child's result unread by its parent when the process is killed
(SIGKILL) is delivered to the recovered parent, once: it was committed in the
child's row before the parent's run was offered it (``subagent._durable._kept``). Before,
the child's row said ``ended`` and the parent's did not hold the result: it was
delivered to nobody."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import trio

from agentcore import (
    BackgroundChild,
    Checkpoint,
    CheckpointKind,
    Message,
    ModelRequest,
    RunState,
    ToolCall,
)
from agentcore._run._state import Phase
from agentcore.testing import ScriptedModel
from ledger import JsonlSink, query, verify
from subagent import Spec, SqliteCheckpoints, SubagentTool, open_pool
from subagent._reply import RESULT_PREFIX
from tests.subagent._bgparts import START, STARTED
from tests.subagent.test_recover_background import recover, register, running_state

ROOT = Path(__file__).resolve().parents[2]
RESULT = RESULT_PREFIX + json.dumps({"agent": "bg", "path": ["root/0001", "bg/0002"],
                                     "output": "bg done: worked"})


def test_a_result_unread_at_a_crash_is_delivered_after_it(tmp_path: Path) -> None:
    db, ledger, log = tmp_path / "c.db", tmp_path / "audit.jsonl", tmp_path / "log"
    with subprocess.Popen([sys.executable, "-m", "tests.subagent._bgcrash", db, ledger, log],
                          cwd=ROOT, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"kept\n"
        os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    root, bg = trio.run(SqliteCheckpoints(db).rows)
    assert (root.run_id, root.status, bg.parent, bg.call_id, bg.status) == (
        "root/0001", "running", "root/0001", "start-bg", "ended")
    assert bg.state is not None
    [kept] = bg.state.children
    assert kept.background is not None and kept.background.result == RESULT
    assert [e.kind for e in query(ledger)].count("result_delivered") == 0

    contents, kinds, accepted = trio.run(recover, db, ledger, log)
    assert contents == ["go", "", STARTED, RESULT, "root got bg done: worked"]
    assert (accepted, log.read_text()) == (1, "work\n")  # bg's work is not run again
    assert kinds.count("result_delivered") == 1
    verify(ledger)


def _kept(call_id: str = "start-bg") -> RunState:
    # bg's result as _durable._kept.kept_state makes it.
    state = RunState.begin([], run_id="root/0001/bg/0002", agent="bg",
                           path=("root/0001", "bg/0002"), input="work")
    state.phase = Phase.ended
    state.background = BackgroundChild(call_id, "bg", RESULT, "bg done: worked", None)
    return state


async def _crashed(db: Path, root_messages: list[Message], kept: RunState) -> None:
    root = running_state(root_messages, "root/0001", "root", "go")
    bg = running_state([Message("user", "work")], "root/0001/bg/0002", "bg", "work")
    async with SqliteCheckpoints(db) as store:
        await store.write("root", None, None, Checkpoint(CheckpointKind.turn, root))
        await store.write("bg", "root/0001", "start-bg", Checkpoint(CheckpointKind.ended, bg))
        await store.write_kept("bg", "root/0001", "start-bg", kept)


async def test_a_kept_result_the_parent_read_is_not_delivered_again(tmp_path: Path) -> None:
    # root read the result and checkpointed its turn before the crash.
    db, ledger, log = tmp_path / "c.db", tmp_path / "audit.jsonl", tmp_path / "log"
    read = [Message("user", "go"), Message("assistant", "", tool_calls=[START]),
            Message("tool", STARTED, tool_call_id="start-bg"), Message("user", RESULT)]
    await _crashed(db, read, _kept())
    contents, kinds, accepted = await recover(db, ledger, log)
    assert contents == ["go", "", STARTED, RESULT, "root got bg done: worked"]
    assert (accepted, kinds.count("result_delivered")) == (1, 0)


async def test_a_kept_result_of_another_call_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    started = [Message("user", "go"), Message("assistant", "", tool_calls=[START]),
               Message("tool", STARTED, tool_call_id="start-bg")]
    await _crashed(db, started, _kept("other"))
    sink = JsonlSink(tmp_path / "audit.jsonl")
    async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
        register(pool, sink, tmp_path / "log")
        recovered = await pool.recover()
    await sink.aclose()
    assert list(recovered) == []
    [(run_id, error)] = recovered.failed
    assert (run_id, str(error)) == ("root/0001", (
        "checkpoint of run 'root/0001/bg/0002' holds a kept result that is not its "
        "call's (edited or damaged); refusing to recover it"))


WAIT = ToolCall("d1", "subagent", '{"agent": "bg", "task": "work"}')
ANSWER = json.dumps({"agent": "bg", "path": ["root/0001", "bg/0002"],
                     "output": "bg done: worked"})


def _waiting_root() -> ScriptedModel:
    # root: delegates to bg and waits (d1), then answers with what it got.
    def reply(request: ModelRequest) -> Message:
        if not any(m.role == "assistant" for m in request.messages):
            return Message("assistant", "", tool_calls=[WAIT])
        return Message("assistant", f"root got {request.messages[-1].content}")

    return ScriptedModel(reply)


async def test_a_finished_delegated_child_answers_its_call_in_flight(tmp_path: Path) -> None:
    # The crash came after bg (wait: true) finished and its answer was kept, before
    # root's next checkpoint: root's row still has d1 in flight.
    db, log = tmp_path / "c.db", tmp_path / "log"
    messages = [Message("user", "go"), Message("assistant", "", tool_calls=[WAIT])]
    root = running_state(messages, "root/0001", "root", "go")
    bg = running_state([Message("user", "work")], "root/0001/bg/0002", "bg", "work")
    answer = _kept("d1")
    assert answer.background is not None
    answer.background = BackgroundChild("d1", "bg", ANSWER, "bg done: worked", None)
    async with SqliteCheckpoints(db) as store:
        await store.write("root", None, None, Checkpoint(CheckpointKind.call, root, ("d1",)))
        await store.write("bg", "root/0001", "d1", Checkpoint(CheckpointKind.ended, bg))
        await store.write_kept("bg", "root/0001", "d1", answer)
    sink = JsonlSink(tmp_path / "audit.jsonl")
    async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
        register(pool, sink, log)
        pool.register(Spec("root", model=_waiting_root(), tools=[SubagentTool(pool)]))
        [task] = await pool.recover()
        result = await task.wait()
        assert pool.statistics().accepted == 1  # bg is not run again
    await sink.aclose()
    assert [m.content for m in result.messages] == [
        "go", "", ANSWER, f"root got {ANSWER}"]
    assert not log.exists()
