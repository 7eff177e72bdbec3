"""A background child's result unread by its parent when the process is killed
(SIGKILL) is delivered to the recovered parent, once: it was committed in the
child's row before the parent's run was offered it (``subagent._bgrows``). Before,
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

from agentcore import BackgroundChild, Checkpoint, CheckpointKind, Message, RunState
from agentcore._state import Phase
from ledger import JsonlSink, query, verify
from subagent import SqliteCheckpoints, open_pool
from subagent._background import RESULT_PREFIX
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
    # bg's result as _bgrows.kept_state makes it.
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
        "background call's (edited or damaged); refusing to recover it"))
