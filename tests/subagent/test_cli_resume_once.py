"""``subagent resume`` takes a paused state once, whatever the file is called (issue 32
item 2): the claim is in the file itself (written under its lock) and in the ledger
chain, so resuming ``FILE.resumed``, or a copy of the file made before the resume,
is refused instead of running the approved write again. Run as subprocesses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import ledger

from .test_cli import run, write_specs
from .test_cli_pause import WRITE


def _paused_and_approved(tmp_path: Path) -> tuple[Path, Path, Path]:
    specs = write_specs(tmp_path, [WRITE])
    paused = tmp_path / "run.json"
    log = tmp_path / "l.jsonl"
    done = run("run", str(specs), "--agent", "helper", "write it", "--approve-later",
               str(paused), "--ledger", str(log), "--workspace", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert run("approve", str(paused), "c1", "--by", "alice", cwd=tmp_path).returncode == 0
    return specs, paused, log


def _resume(tmp_path: Path, path: Path, specs: Path, log: Path) -> tuple[int, str, str]:
    (tmp_path / "replies.json").write_text(json.dumps([{"content": "wrote it"}]))
    done = run("resume", str(path), str(specs), "--ledger", str(log),
               "--workspace", str(tmp_path), cwd=tmp_path)
    return done.returncode, done.stdout, done.stderr


def _results(log: Path) -> list[str | None]:
    return [e.call_id for e in ledger.query(log, kind="tool_result")]


@pytest.mark.slow
def test_the_resumed_file_is_refused(tmp_path: Path) -> None:
    specs, paused, log = _paused_and_approved(tmp_path)
    code, out, err = _resume(tmp_path, paused, specs, log)
    assert code == 0, out + err
    assert (tmp_path / "out.txt").read_text() == "x"
    (tmp_path / "out.txt").write_text("edited by the user")
    # Before: this ran the approved write again and exited 0.
    code, out, err = _resume(tmp_path, tmp_path / "run.json.resumed", specs, log)
    assert (code, out) == (2, "")
    assert err == (
        f"subagent: the paused run {tmp_path / 'run.json.resumed'} was resumed already: "
        "resuming or answering it again could run its approved calls twice\n")
    assert (tmp_path / "out.txt").read_text() == "edited by the user"
    assert _results(log) == ["c1"]
    for command in (("pending",), ("approve", "c1")):
        answered = run(*command[:1], str(tmp_path / "run.json.resumed"), *command[1:],
                       cwd=tmp_path)
        assert (answered.returncode, answered.stderr) == (2, err)


@pytest.mark.slow
def test_a_copy_made_before_the_resume_is_refused_by_the_ledger(tmp_path: Path) -> None:
    specs, paused, log = _paused_and_approved(tmp_path)
    copy = tmp_path / "copy.json"
    shutil.copy(paused, copy)
    text = copy.read_text()
    code, out, err = _resume(tmp_path, paused, specs, log)
    assert code == 0, out + err
    (tmp_path / "out.txt").write_text("edited by the user")
    code, out, err = _resume(tmp_path, copy, specs, log)
    assert (code, out) == (2, "")
    assert err.startswith("subagent: the paused run 'helper/0001' was resumed already "
                          "from this state (the ledger records it): "), err
    assert (tmp_path / "out.txt").read_text() == "edited by the user"
    assert _results(log) == ["c1"]
    assert [e.kind for e in ledger.query(log, kind="resume_claimed")] == ["resume_claimed"]
    assert ledger.verify(log).ok
    # Refused before it was taken: the copy is as it was, and refused again.
    assert copy.read_text() == text
    assert not (tmp_path / "copy.json.resumed").exists()
    assert _resume(tmp_path, copy, specs, log)[::2] == (2, err)
    assert _results(log) == ["c1"]


@pytest.mark.slow
def test_a_resume_whose_ledger_claim_cannot_be_written_leaves_the_file(tmp_path: Path) -> None:
    import trio

    specs, paused, log = _paused_and_approved(tmp_path)
    text = paused.read_text()

    async def held() -> tuple[int, str, str]:
        # Another writer holds the ledger: the claim cannot be recorded.
        sink = ledger.JsonlSink(log)
        try:
            await sink.record(ledger.Record("note"))
            return await trio.to_thread.run_sync(_resume, tmp_path, paused, specs, log)
        finally:
            await sink.aclose()

    code, out, err = trio.run(held)
    assert code == 2, out + err
    # Before: "unexpected error: SinkError", exit 1, and the file taken: never resumable.
    assert err == (
        f"subagent: cannot record the resume in the ledger (cannot record to ledger {log}: "
        "another sink is writing to it (in this process or another); a ledger takes one "
        f"writer at a time); the paused run {paused} is left as it was\n")
    assert paused.read_text() == text  # not claimed: it can be resumed later
    assert not (tmp_path / "out.txt").exists()
    code, out, err = _resume(tmp_path, paused, specs, log)
    assert code == 0, out + err
    assert (tmp_path / "out.txt").read_text() == "x"
