"""Crash recovery (issue 20 item 3): a process running a three-level delegation tree
with SqliteCheckpoints is SIGKILLed at random points, then recovered (recoveries are
killed at random too, until one finishes).

Every recovery finishes; no finished mutating call ran twice (each tool logs its
executions); the ledger (a JsonlSink reopened after each kill) verifies across the
crashes. ``CHECKPOINT_CRASH_RUNS`` sets how many kills (default 3, for CI; 50 or more
with ``HYPOTHESIS_PROFILE=long``).
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger import query, repair, verify
from tests.subagent._crashtree import SCRIPTS

ROOT = Path(__file__).resolve().parents[2]
_LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"
RUNS = int(os.environ.get("CHECKPOINT_CRASH_RUNS", "50" if _LONG else "3"))
#: Tool executions of one whole run of the tree.
EXECUTIONS = sum(len(turn) for script in SCRIPTS.values() for turn in script
                 if turn[0][0] != "subagent")


def start(*args: Path | str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.subagent._crashtree", *map(str, args)],
        cwd=ROOT, stdout=subprocess.PIPE,
    )


def kill_after(proc: subprocess.Popen[bytes], lines: int, pause: float) -> bool:
    """Kill ``proc`` ``pause`` seconds after it printed ``lines`` lines past "ready";
    return whether it was killed (rather than finishing first)."""
    assert proc.stdout is not None
    seen = -1
    for line in proc.stdout:
        seen += 1
        if line == b"finished\n" or seen >= lines:
            break
    time.sleep(pause)
    os.kill(proc.pid, signal.SIGKILL)
    proc.stdout.read()
    proc.stdout.close()
    proc.wait()
    return proc.returncode == -signal.SIGKILL


def finish(db: Path, ledger: Path, log: Path, out: Path) -> dict[str, object]:
    proc = start("recover", db, ledger, log, out)
    assert proc.wait(timeout=120) == 0
    if proc.stdout is not None:
        proc.stdout.read()
        proc.stdout.close()
    result: dict[str, object] = json.loads(out.read_text())
    return result


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(RUNS))
def test_a_killed_tree_recovers_without_repeating_a_finished_call(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    db, ledger, log, out = (tmp_path / n for n in ("ckpt.db", "audit.jsonl", "log", "out"))
    killed = kill_after(start("run", db, ledger, log), rng.randint(0, EXECUTIONS),
                        rng.uniform(0, 0.01))
    # Recoveries may be killed too, up to twice, then one runs to its end.
    for _ in range(2):
        if not killed or rng.random() < 0.5:
            break
        kill_after(start("recover", db, ledger, log, out), rng.randint(0, EXECUTIONS),
                   rng.uniform(0, 0.01))
    result = finish(db, ledger, log, out)
    if killed:
        assert result["outputs"] in ([], *([f"root done, {n} errors"] for n in range(5)))

    lines = log.read_text().splitlines() if log.exists() else []
    writes = collections.Counter(line for line in lines if line.startswith("write "))
    assert [w for w, n in writes.items() if n > 1] == []  # never ran twice
    assert len(writes) <= 7

    if not ledger.exists():  # killed before anything was recorded
        assert (lines, result) == ([], {"recovered": 0, "outputs": []})
        return
    repair(ledger)
    report = verify(ledger)
    assert report.ok, report.message
    entries = query(ledger)
    ends = [e for e in entries if e.kind == "run_end" and e.run_id == "root/0001"]
    if not ends:
        # Killed before the root's first checkpoint: it had run no tool, and there
        # is nothing to recover (it is submitted again by its caller).
        assert (lines, result) == ([], {"recovered": 0, "outputs": []})
        assert [e.kind for e in entries if e.kind.startswith("tool")] == []
    for e in entries:
        if e.kind == "run_resumed":
            assert e.data is not None and str(e.data["checkpoint"]).startswith(e.run_id + "@")


@pytest.mark.slow
def test_a_finished_tree_leaves_nothing_to_recover(tmp_path: Path) -> None:
    db, ledger, log, out = (tmp_path / n for n in ("ckpt.db", "audit.jsonl", "log", "out"))
    proc = start("run", db, ledger, log)
    assert proc.wait(timeout=120) == 0
    assert proc.stdout is not None
    assert proc.stdout.read().split() == [
        b"ready", b"write", b"write", b"write", b"write", b"look", b"write", b"bump",
        b"write", b"write", b"bump", b"finished",
    ]
    proc.stdout.close()
    assert finish(db, ledger, log, out) == {"recovered": 0, "outputs": []}
    assert oct(db.stat().st_mode & 0o777) == "0o600"
