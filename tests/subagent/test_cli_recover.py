"""``subagent recover FILE SPECS`` reports the trees that wait for a human, with the
pending calls and the ``--approve-later`` wording, and stores them with
``--approve-later FILE`` so that they can be answered and resumed (run as
subprocesses)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from .test_cli import run, write_specs
from .test_cli_pause import WRITE

PENDING = ('c1  helper/0001  write_file {"path": "out.txt", "content": "x"}  '
           "(tool 'write_file' may change things: approve it later)\n")


@pytest.mark.slow
def test_recover_lists_a_tree_paused_before_the_crash(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [WRITE, {"content": "never reached"}])
    db = tmp_path / "ckpt.db"
    log = tmp_path / "l.jsonl"
    common = ("--ledger", str(log), "--workspace", str(tmp_path), "--plain")
    done = run("run", str(specs), "--agent", "helper", "write it", "--approve-later",
               str(tmp_path / "first.json"), "--checkpoints", str(db), *common, cwd=tmp_path)
    assert done.returncode == 4, done.stderr

    listed = run("recover", str(db), str(specs), *common, cwd=tmp_path)
    assert listed.returncode == 4, listed.stderr
    assert (
        "output:\nleft paused at checkpoint helper/0001@3 (it waits for a human):\n"
        + PENDING + "the run paused: 1 calls wait for approval\n"
    ) in listed.stdout

    later = tmp_path / "later.json"
    stored = run("recover", str(db), str(specs), "--approve-later", str(later), *common,
                 cwd=tmp_path)
    assert stored.returncode == 4, stored.stderr
    assert (
        "output:\nleft paused at checkpoint helper/0001@3 (it waits for a human):\n"
        + PENDING + f"the run paused: 1 calls wait for approval, stored in {later}\n"
        f"  subagent pending {later}\n"
        f"  subagent approve {later} CALL_ID   (or: subagent deny {later} CALL_ID "
        f"--reason TEXT)\n  subagent resume {later} SPECS --ledger LEDGER\n"
    ) in stored.stdout
    assert stat.S_IMODE(later.stat().st_mode) == 0o600
    assert run("pending", str(later), cwd=tmp_path).stdout == PENDING

    assert run("approve", str(later), "c1", cwd=tmp_path).returncode == 0
    (tmp_path / "replies.json").write_text(json.dumps([{"content": "wrote it"}]))
    done = run("resume", str(later), str(specs), "--checkpoints", str(db), *common,
               cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "out.txt").read_text() == "x"
    # The file was taken by that resume: a second one (or a late answer) is refused.
    assert not later.exists()
    assert (tmp_path / "later.json.resumed").exists()
    twice = run("resume", str(later), str(specs), *common, cwd=tmp_path)
    assert (twice.returncode, twice.stderr) == (2, (
        f"subagent: the paused run {later} was resumed already (it is kept as "
        "later.json.resumed): resuming or answering it again could run its approved "
        "calls twice\n"))
    assert run("deny", str(later), "c1", cwd=tmp_path).returncode == 2
    assert (tmp_path / "out.txt").read_text() == "x"
    # Resumed with the same checkpoints: it ended, nothing is left.
    again = run("recover", str(db), str(specs), *common, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "output:\nnothing to recover: no task was left unfinished\n" in again.stdout


def test_recover_lists_a_tree_it_cannot_recover(tmp_path: Path) -> None:
    # A root of a spec the file does not hold: listed, exit 1; nothing else stops.
    import trio

    from agentcore import Checkpoint, CheckpointKind, Message, RunState
    from agentcore._run._checkpoint import snapshot
    from subagent import SqliteCheckpoints

    specs = write_specs(tmp_path, [{"content": "never reached"}])
    db = tmp_path / "ckpt.db"
    state = snapshot(RunState.begin([Message("user", "go")], run_id="ghost/0001",
                                    agent="ghost"))

    async def crashed() -> None:
        async with SqliteCheckpoints(db) as store:
            await store.write("ghost", None, None, Checkpoint(CheckpointKind.turn, state))

    trio.run(crashed)
    done = run("recover", str(db), str(specs), "--ledger", str(tmp_path / "l.jsonl"),
               "--workspace", str(tmp_path), "--plain", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert ("not recovered: run ghost/0001: UnknownAgentError: unknown agent 'ghost'; "
            "registered agents: helper") in done.stdout


def test_recover_from_a_missing_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It created an empty database at the (mistyped) path, said "nothing to recover"
    # and exited 3, "the ledger did not verify", as the run wrote no ledger.
    from subagent._cli._cli import main

    specs = write_specs(tmp_path, [])
    missing = tmp_path / "ckpt.db"
    code = main(["recover", str(missing), str(specs), "--ledger", str(tmp_path / "l.jsonl"),
                 "--plain"])
    assert (code, capsys.readouterr().err) == (
        2, f"subagent: no checkpoint file {missing}: nothing to recover from\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.txt", "replies.json", "specs.toml"]


def test_recover_with_nothing_left_and_a_new_ledger_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from subagent._cli._cli import main

    specs = write_specs(tmp_path, [{"content": "nothing to do"}])
    db = tmp_path / "ckpt.db"
    common = ["--workspace", str(tmp_path), "--plain"]
    assert main(["run", str(specs), "--agent", "helper", "idle", "--checkpoints", str(db),
                 "--ledger", str(tmp_path / "run.jsonl"), *common]) == 0
    capsys.readouterr()
    fresh = tmp_path / "recover.jsonl"
    assert main(["recover", str(db), str(specs), "--ledger", str(fresh), *common]) == 0
    out = capsys.readouterr().out
    assert "output:\nnothing to recover: no task was left unfinished\n" in out
    assert out.endswith(f"ledger: {fresh}\nledger: nothing was recorded\n")


def test_run_with_a_checkpoint_file_that_is_not_a_database_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its task failed at its first checkpoint instead: exit 1, the ledger written,
    # where `recover` refuses the same file with exit 2 before anything runs.
    from subagent._cli._cli import main

    specs = write_specs(tmp_path, [{"content": "done"}])
    db = tmp_path / "ckpt.db"
    db.write_bytes(b"not sqlite" * 500)
    code = main(["run", str(specs), "--agent", "helper", "idle", "--checkpoints", str(db),
                 "--ledger", str(tmp_path / "l.jsonl"), "--workspace", str(tmp_path),
                 "--plain"])
    assert (code, capsys.readouterr().err) == (
        2, "subagent: cannot read the checkpoint database: file is not a database\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt.db", "notes.txt", "replies.json", "specs.toml"]
