"""``subagent run --approve-later``, ``pending``, ``approve``, ``deny``, ``resume``
(issue 20 item 4), run as subprocesses."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import ledger

from .test_cli import run, write_specs

WRITE: dict[str, object] = {"tool_calls": [{"id": "c1", "name": "write_file",
                         "arguments": {"path": "out.txt", "content": "x"}}]}


@pytest.mark.slow
def test_pause_approve_resume(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [WRITE, {"content": "never reached"}])
    paused = tmp_path / "paused.json"
    log = tmp_path / "l.jsonl"
    done = run("run", str(specs), "--agent", "helper", "write it", "--approve-later",
               str(paused), "--ledger", str(log), "--workspace", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert "the run paused: 1 calls wait for approval, stored in " in done.stdout
    assert f"  subagent approve {paused} CALL_ID" in done.stdout
    assert stat.S_IMODE(paused.stat().st_mode) == 0o600
    assert not (tmp_path / "out.txt").exists()

    listed = run("pending", str(paused), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == (
        'c1  helper/0001  write_file {"path": "out.txt", "content": "x"}  '
        "(tool 'write_file' may change things: approve it later)\n"
    )
    wrong = run("approve", str(paused), "c9", cwd=tmp_path)
    assert (wrong.returncode, wrong.stderr) == (
        2, "subagent: no deferred call with id 'c9'; waiting for an answer: 'c1'\n"
    )
    assert run("approve", str(paused), "c1", "--by", "alice", cwd=tmp_path).returncode == 0
    assert run("pending", str(paused), cwd=tmp_path).stdout == "no call waits for an answer\n"

    # A new process replays its file from the start: the reply after the write.
    (tmp_path / "replies.json").write_text(json.dumps([{"content": "wrote it"}]))
    done = run("resume", str(paused), str(specs), "--ledger", str(log),
               "--workspace", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "output:\nwrote it\n" in done.stdout
    assert (tmp_path / "out.txt").read_text() == "x"
    assert ledger.verify(log).ok
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    approval = next(e for e in entries if e["kind"] == "approval")
    assert (approval["call_id"], approval["verdict"], approval["data"]) == (
        "c1", "allow", {"by": "alice"}
    )
    assert [e["kind"] for e in entries].count("run_resumed") == 1


@pytest.mark.slow
def test_deny_and_a_damaged_file(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [WRITE])
    paused = tmp_path / "paused.json"
    done = run("run", str(specs), "--agent", "helper", "write it", "--approve-later",
               str(paused), "--ledger", str(tmp_path / "l.jsonl"),
               "--workspace", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert run("deny", str(paused), "c1", "--reason", "not today",
               cwd=tmp_path).returncode == 0
    (tmp_path / "replies.json").write_text(json.dumps([{"content": "left it"}]))
    done = run("resume", str(paused), str(specs), "--ledger", str(tmp_path / "l.jsonl"),
               "--workspace", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "denied write_file: not today" in done.stdout
    assert not (tmp_path / "out.txt").exists()

    # resume took the file (its claim, moved to paused.json.resumed): damage a copy of
    # the state the claim holds.
    taken = tmp_path / "paused.json.resumed"
    assert not paused.exists()
    claim = taken.read_text()
    assert claim.startswith('{"format":"subagent.ResumedRun","version":1,"run_id":')
    state = claim[claim.index(',"state":') + len(',"state":'):-1]
    paused.write_text(state.replace("helper", "helpex"))
    broken = run("pending", str(paused), cwd=tmp_path)
    assert broken.returncode == 2
    assert broken.stderr == (
        f"subagent: cannot read the paused run {paused}: RunState does not match its "
        "digest: it was changed after it was written (edited by hand or damaged); "
        "refusing to resume it\n"
    )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert run("pending", str(fifo), cwd=tmp_path).stderr == (
        f"subagent: cannot read the paused run {fifo}: it is a FIFO, not a regular file\n"
    )


@pytest.mark.slow
def test_run_with_checkpoints_then_recover(tmp_path: Path) -> None:
    import trio

    from agentcore import Checkpoint, CheckpointKind, Message, RunState, ToolCall
    from agentcore._run._checkpoint import snapshot
    from subagent import SqliteCheckpoints

    specs = write_specs(tmp_path, [{"content": "nothing to do"}])
    db = tmp_path / "ckpt.db"
    log = tmp_path / "l.jsonl"
    done = run("run", str(specs), "--agent", "helper", "idle", "--checkpoints", str(db),
               "--ledger", str(log), "--workspace", str(tmp_path), "--plain", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    again = run("recover", str(db), str(specs), "--ledger", str(log), "--plain",
                "--workspace", str(tmp_path), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "output:\nnothing to recover: no task was left unfinished\n" in again.stdout

    # A run that was killed while its write_file call was in flight.
    call = ToolCall("c1", "write_file", json.dumps({"path": "out.txt", "content": "x"}))
    state = RunState.begin([Message("system", "s"), Message("user", "write it"),
                            Message("assistant", "", tool_calls=[call])],
                           run_id="helper/0001", agent="helper", path=("helper/0001",),
                           input="write it")

    async def crashed() -> None:
        async with SqliteCheckpoints(tmp_path / "crashed.db") as store:
            point = Checkpoint(CheckpointKind.call, snapshot(state), ("c1",))
            await store.write("helper", None, None, point)

    trio.run(crashed)
    (tmp_path / "replies.json").write_text(json.dumps([{"content": "gave up"}]))
    done = run("recover", str(tmp_path / "crashed.db"), str(specs), "--ledger", str(log),
               "--plain", "--yes", "--workspace", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "output:\ngave up\n" in done.stdout
    assert not (tmp_path / "out.txt").exists()  # in flight at the crash: not repeated
    assert ledger.verify(log).ok
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    [resumed] = [e for e in entries if e["kind"] == "run_resumed"]
    assert resumed["data"] == {"answers": 0, "pending": 1, "checkpoint": "helper/0001@1",
                               "interrupted": "c1"}
