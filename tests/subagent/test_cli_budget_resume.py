"""``subagent resume`` goes on from the budget spent before the pause (issue 32 item
3): the spend is in the paused-run file, so each approval no longer resets it. Run
as subprocesses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_cli import run, write_specs


def _write(call_id: str, name: str) -> dict[str, object]:
    return {"tool_calls": [{"id": call_id, "name": "write_file",
                            "arguments": {"path": name, "content": call_id}}]}


@pytest.mark.slow
def test_an_approval_does_not_reset_the_budget(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [_write("c1", "one.txt")],
                        "budget = { model_calls = 2 }\n")
    paused = tmp_path / "run.json"
    log = tmp_path / "l.jsonl"
    done = run("run", str(specs), "--agent", "helper", "write", "--approve-later",
               str(paused), "--ledger", str(log), "--workspace", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    stored = json.loads(paused.read_text())["state"]["spent"]
    assert stored == {"task": {"input_tokens": 0, "output_tokens": 0, "cost": 0.0,
                               "model_calls": 1, "tasks": 1}}
    assert run("approve", str(paused), "c1", cwd=tmp_path).returncode == 0
    # A new process replays its replies from the start: the next turn asks to write again.
    (tmp_path / "replies.json").write_text(json.dumps([_write("c2", "two.txt")]))
    done = run("resume", str(paused), str(specs), "--ledger", str(log),
               "--workspace", str(tmp_path), cwd=tmp_path)
    # Before: the second call counted as the first of a new budget, and the run paused
    # again (exit 4), as it did after each of any number of approvals.
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("the task did not finish: task helper/0001 spent its budget: model_calls 2 "
            "of 2, reached by a model call of helper/0001") in done.stdout
    assert (tmp_path / "one.txt").read_text() == "c1"
    assert not (tmp_path / "two.txt").exists()
