"""A tree Temporal cancels names ``temporal`` as the cause of its ``task_cancelled``
ledger entries (issue 33), and its runs' ``abort`` entries say so in words, in
process: ``run_tree`` with a link whose cancel flag is set once the root's model call
is parked (no server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from agentcore.testing import Blocked, ScriptedModel
from subagent import Defaults, Spec, SpecFile
from subagent.temporal._inputs import ActivityInput, EventBatch
from subagent.temporal._tree import Cancelled, Link, run_tree


async def _nothing(batch: EventBatch) -> None:
    await trio.lowlevel.checkpoint()


async def test_a_temporal_cancel_names_temporal(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    model = ScriptedModel([Blocked("never")])
    specs = SpecFile("slow", (Spec("slow", model=model),), {}, {}, Defaults())
    # Temporal asks the activity to cancel once the root is parked in its model call.
    # (Not at a virtual time: the clock jumps while a checkpoint's thread works, so
    # 5 s could come before the run started, and its entry had no end_reason.)
    link = Link(_nothing, lambda payload: None, lambda: model.blocked == 1)
    with pytest.raises(Cancelled):
        await run_tree(ActivityInput("wf", "slow", "go"), specs, link, gate=None,
                       ledger_path=tmp_path / "ledger.jsonl")
    entries = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    cancelled = [(e["run_id"], e["data"]) for e in entries if e["kind"] == "task_cancelled"]
    assert cancelled == [
        ("slow/0001", {"agent": "slow", "end_reason": "aborted", "cause": "temporal"}),
    ]
    aborts = [(e["run_id"], e["error"]) for e in entries if e["kind"] == "abort"]
    assert aborts == [
        ("slow/0001", "cancelled (temporal): Temporal cancelled the activity running its tree"),
    ]
