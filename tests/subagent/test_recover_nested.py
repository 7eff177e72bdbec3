"""A recovered (or resumed) nested run delegates again (issue 32 item 1): lead -> mid
-> leaf, mid delegating three leaves one after another. Before, the runs a resumed
call started inherited its ``resumed_call_state`` (a context variable), so mid's next
delegation tried to resume mid's own running state (``ResumeError: this RunState is
not paused (running)``, a leaf's work silently never done); and the pool numbered new
tasks from 1 again, so a leaf started after recovery could take the run id of the
leaf it had just continued (its checkpoint row overwritten)."""

from __future__ import annotations

import collections
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import agentcore
from ledger import MemorySink
from subagent import SqliteCheckpoints, TaskPaused, open_pool
from tests.subagent._nestedtree import mid_results, register

ROOT = Path(__file__).resolve().parents[2]
MID = "lead/0001/mid/0002"


def _copy(source: Path, target: Path) -> None:
    # What a SIGKILL would leave: every committed transaction, nothing else.
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


def _path(run_id: str) -> list[str]:
    # A run id's AgentPath: "a/0001/b/0002" -> ["a/0001", "b/0002"].
    parts = run_id.split("/")
    return ["/".join(parts[k:k + 2]) for k in range(0, len(parts), 2)]


def _leaf(path: list[str], output: str) -> str:
    return json.dumps({"agent": "leaf", "path": path, "output": output})


async def _crash_at(live: Path, crashed: Path, log: Path, point: int) -> None:
    # Run the tree; at its ``point``-th write (0-based), once the write ran, keep
    # what a SIGKILL would leave in ``crashed`` and stop.
    writes = 0

    async with SqliteCheckpoints(live) as store, open_pool(checkpoints=store) as pool:
        def on_write(line: str) -> None:
            nonlocal writes
            if writes == point:
                _copy(live, crashed)
                pool.cancel()
            writes += 1

        register(pool, log, on_write=on_write)
        await pool.submit("lead", "go")


async def _recover(crashed: Path, log: Path) -> tuple[list[str], list[str | None]]:
    audit = MemorySink()
    async with SqliteCheckpoints(crashed) as store, open_pool(checkpoints=store) as pool:
        register(pool, log, audit)
        recovered = await pool.recover()
        outputs = [(await task.wait()).output for task in recovered]
        assert await pool.recover() == []
    return outputs, mid_results(audit)


@pytest.mark.parametrize("point", range(6))
async def test_a_recovered_nested_run_delegates_again(tmp_path: Path, point: int) -> None:
    live, crashed, log = tmp_path / "live.db", tmp_path / "crashed.db", tmp_path / "log"
    await _crash_at(live, crashed, log, point)
    outputs, results = await _recover(crashed, log)
    # The crash was in leaf ``i`` (run id .../leaf/000<3+i>), at one of its writes,
    # which ran: recovered, that call is answered interrupted (not repeated) and the
    # leaf goes on; mid delegates the leaves after it, numbered past the file's runs.
    # Every write ran once, as in the run that did not crash.
    i = point // 2
    leaves = [f"{MID}/leaf/{3 + n:04d}" for n in range(3)]
    assert log.read_text().splitlines() == [
        f"write {leaves[n]} leaf-{w}-0" for n in range(3) for w in range(2)]
    assert outputs == ["lead done, 0 errors"]
    assert results == [_leaf(_path(leaves[n]),
                             f"leaf done, {int(n == i)} errors") for n in range(i, 3)]


async def _first_leaf_asks(request: agentcore.GateRequest) -> agentcore.GateDecision:
    # Defers the first leaf's second write; allows every other call.
    await trio.lowlevel.checkpoint()
    if request.path[-1] == "leaf/0003" and request.call.id == "leaf-1-0":
        return agentcore.GateDecision.defer("ask a human")
    return agentcore.GateDecision(True, "allowed")


async def test_a_resumed_nested_run_delegates_again(tmp_path: Path) -> None:
    # The same tree paused for approval inside its first leaf, approved, resumed.
    log = tmp_path / "log"
    audit = MemorySink()
    async with open_pool() as pool:
        register(pool, log, audit, gate=_first_leaf_asks)
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("lead", "go")).wait()
        state = info.value.state
        state.approve("leaf-1-0", path=("lead/0001", "mid/0002", "leaf/0003"))
        result = await (await pool.resume(state)).wait()
    assert result.output == "lead done, 0 errors"
    leaves = [f"{MID}/leaf/{3 + n:04d}" for n in range(3)]
    assert mid_results(audit) == [_leaf(_path(leaf), "leaf done, 0 errors") for leaf in leaves]
    assert log.read_text().splitlines() == [
        f"write {leaf} leaf-{w}-0" for leaf in leaves for w in range(2)]


def _start(*args: Path | str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.subagent._nestedtree", *map(str, args)],
        cwd=ROOT, stdout=subprocess.PIPE,
    )


@pytest.mark.slow
@pytest.mark.parametrize("writes", range(1, 7))
def test_a_nested_tree_killed_mid_leaf_does_every_leaf_once(tmp_path: Path, writes: int) -> None:
    # SIGKILLed once it printed ``writes`` writes (it may have gone a little further),
    # then recovered in a new process.
    db, log, out = tmp_path / "ckpt.db", tmp_path / "log", tmp_path / "out"
    proc = _start("run", db, log)
    assert proc.stdout is not None
    seen = 0
    finished = False
    for line in proc.stdout:
        seen += line.startswith(b"write ")
        finished = line == b"finished\n"
        if seen == writes or finished:
            break
    os.kill(proc.pid, signal.SIGKILL)
    # (On a loaded machine it may have finished the tree before the kill.)
    finished = finished or b"finished\n" in proc.stdout.read()
    proc.stdout.close()
    proc.wait()
    again = _start("recover", db, log, out)
    assert again.wait(timeout=120) == 0
    assert again.stdout is not None
    again.stdout.close()
    result = json.loads(out.read_text())
    assert (result["recovered"], result["outputs"]) == (
        (0, []) if finished else (1, ["lead done, 0 errors"]))
    # Every delegation after the crash got its leaf's answer.
    assert [json.loads(r)["output"][:10] for r in result["results"]] == (
        ["leaf done,"] * len(result["results"]))
    lines = log.read_text().splitlines()
    assert [line for line, n in collections.Counter(lines).items() if n > 1] == []
    # Three leaves, each with its own run id, each of which wrote.
    assert len({line.split()[1] for line in lines}) == 3
