"""``subagent approve`` / ``deny`` answer a paused-run file under an exclusive lock
(issue 20, "Other limits"): two processes answering different calls of the same file
at once lose no answer; a lock held too long is a clear error; ``resume`` takes the
file so that it is not resumed twice."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio

from agentcore import Agent, CallStatus, GateDecision, GateRequest, RunState
from subagent._cli._statefile import StateFileError, answer, locked, read_state, write_state
from tests.agentcore._durable import make_tool, model

ROOT = Path(__file__).resolve().parents[2]
CALLS = 40

# Each answerer waits for a line on standard input (so both start together), then
# answers its calls one after the other through the command line's own entry point.
ANSWERER = """
import sys
from subagent._cli._cli import main
verb, path, ids = sys.argv[1], sys.argv[2], sys.argv[3:]
print("ready", flush=True)
sys.stdin.readline()
for call_id in ids:
    code = main([verb, path, call_id, "--by", verb])
    assert code == 0, code
"""


def paused_with(calls: int) -> RunState:
    async def defer(request: GateRequest) -> GateDecision:
        await trio.lowlevel.checkpoint()
        return GateDecision.defer("ask")

    work = [[[f"c{k}", "write", 0] for k in range(calls)]]
    agent = Agent(model=model(work), tools=[make_tool("write", False)], agent_id="w",
                  gate=defer)

    async def main() -> RunState:
        result = await agent.run("go")
        state = result.state
        assert state is not None
        # The first deferral stops the turn (the rest wait unstarted): as if the gate
        # had deferred each of them, so that each waits for its own answer.
        state.pending = [attrs.evolve(p, status=CallStatus.deferred, reason="ask")
                         for p in state.pending]
        return state

    return trio.run(main)


@pytest.mark.slow
def test_two_processes_answering_at_once_lose_no_answer(tmp_path: Path) -> None:
    path = tmp_path / "paused.json"
    write_state(path, paused_with(CALLS))
    ids = [f"c{k}" for k in range(CALLS)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ANSWERER, verb, str(path), *ids[first::2]],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, cwd=tmp_path, env=env,
        )
        for verb, first in (("approve", 0), ("deny", 1))
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            assert p.stdout.readline() == "ready\n"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], results
    state = read_state(path)
    statuses = {p.call.id: (p.status, p.by) for p in state.pending}
    assert statuses == {
        f"c{k}": ((CallStatus.approved, "approve") if k % 2 == 0
                  else (CallStatus.denied, "deny"))
        for k in range(CALLS)
    }
    assert oct(os.stat(f"{path}.lock").st_mode & 0o777) == "0o600"


def test_a_lock_held_too_long_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("subagent._cli._statefile.LOCK_TIMEOUT", 0.05)
    path = tmp_path / "paused.json"
    write_state(path, paused_with(1))
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(StateFileError) as info, locked(path):
            pass
        assert str(info.value) == (
            f"the paused run {path} is locked by another subagent command (approve, "
            "deny or resume) for more than 0.05s; try again")
        with pytest.raises(StateFileError) as info:
            answer(path, "c0", allow=True, reason=None, by="", run_path=None)
        assert "is locked by another subagent command" in str(info.value)
    finally:
        os.close(fd)
    answer(path, "c0", allow=True, reason=None, by="", run_path=None)
    assert read_state(path).pending[0].status is CallStatus.approved
