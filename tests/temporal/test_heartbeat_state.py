"""The tree's checkpoints in a heartbeat: what is recorded, and what a retried attempt
accepts back (outside input)."""

from __future__ import annotations

import json

import pytest
import trio

import agentcore
from agentcore import Checkpoint, CheckpointKind, Message, RunState
from subagent import CheckpointError
from subagent.temporal._checkpointing import TOO_LARGE, HeartbeatCheckpoints, decode_rows
from subagent.temporal._inputs import ActivityInput, EventBatch
from subagent.temporal._resume import Heartbeat, start_state
from subagent.temporal._tree import Link, run_tree

from .trees import echo_specs


def turn(run_id: str) -> Checkpoint:
    state = RunState.begin([Message("user", "go")], run_id=run_id, agent="a", input="go")
    return Checkpoint(CheckpointKind.turn, agentcore._run._checkpoint.snapshot(state))


@pytest.mark.trio
async def test_each_checkpoint_records_the_live_tree_before_returning() -> None:
    sent: list[str] = []

    async def record(text: str) -> None:
        sent.append(text)

    store = HeartbeatCheckpoints("<heartbeat>", record=record)
    await store.write("a", None, None, turn("r1"))
    await store.write("b", "r1", "c1", turn("r2"))
    await store.write("b", "r1", "c1", Checkpoint(CheckpointKind.ended, turn("r2").state))
    assert [[(row[0], row[4], row[5]) for row in json.loads(text)] for text in sent] == [
        [("r1", "running", 1)],
        [("r1", "running", 1), ("r2", "running", 1)],
        [("r1", "running", 1)],
    ]
    rows = start_state(Heartbeat(2, 0, 0, sent[1]))
    assert rows is not None
    assert [(r.run_id, r.name, r.parent, r.call_id, r.checkpoint) for r in rows] == [
        ("r1", "a", None, None, "r1@1"), ("r2", "b", "r1", "c1", "r2@1")]
    assert store.commits == 3


@pytest.mark.trio
async def test_a_tree_over_the_cap_is_recorded_as_too_large_and_not_resumed() -> None:
    sent: list[str] = []

    async def record(text: str) -> None:
        sent.append(text)

    store = HeartbeatCheckpoints("<heartbeat>", record=record, max_chars=10)
    await store.write("a", None, None, turn("r1"))
    assert sent == [TOO_LARGE]
    with pytest.raises(CheckpointError) as info:
        start_state(Heartbeat(2, 0, 0, sent[0]))
    assert str(info.value) == ("the tree's checkpoints were too large to heartbeat "
                               "(over 1048576 characters)")


@pytest.mark.trio
async def test_a_failed_record_ends_the_checkpoint_with_a_checkpoint_error() -> None:
    async def record(text: str) -> None:
        raise RuntimeError("/secret/host/path")

    store = HeartbeatCheckpoints("<heartbeat>", record=record)
    with pytest.raises(CheckpointError) as info:
        await store.write("a", None, None, turn("r1"))
    assert str(info.value) == "cannot record a checkpoint: RuntimeError"


@pytest.mark.parametrize(("text", "message"), [
    ("x" * 11, "heartbeat state over 10 characters"),
    ("{}", "malformed heartbeat state: Expected `array`, got `object`"),
    ('[["r", "a", null, null, "ended", 1, [], "{}"]]',
     "malformed heartbeated checkpoint of run 'r': bad status or counter"),
])
def test_a_hostile_heartbeat_state_is_refused_by_name(text: str, message: str) -> None:
    with pytest.raises(CheckpointError) as info:
        decode_rows(text, 10 if len(text) == 11 else 1000)
    assert str(info.value) == message


def test_a_state_of_another_run_is_refused() -> None:
    body = turn("other").state.to_json()
    text = json.dumps([["r", "a", None, None, "running", 1, [], body]])
    with pytest.raises(CheckpointError) as info:
        decode_rows(text, 10**6)
    assert str(info.value) == (
        "malformed heartbeated checkpoint of run 'r': its state is another run's")


def test_no_heartbeat_or_no_state_starts_over() -> None:
    assert start_state(None) is None
    assert start_state(Heartbeat(2, 5, 1, None)) is None


async def _nothing(batch: EventBatch) -> None:
    await trio.lowlevel.checkpoint()


def _link(records: list[dict[str, object]], attempt: int,
          details: tuple[object, ...] = ()) -> Link:
    async def record(payload: dict[str, object]) -> bool:
        await trio.lowlevel.checkpoint()
        records.append(payload)
        return False

    return Link(_nothing, records.append, lambda: False, attempt=attempt, details=details,
                record=record)


@pytest.mark.trio
async def test_a_tree_that_ended_before_the_attempt_was_lost_is_not_run_again() -> None:
    records: list[dict[str, object]] = []
    job = ActivityInput("wf", "echo", "hi")
    done = await run_tree(job, echo_specs(), _link(records, 1), gate=None, ledger_path=None)
    assert (done.result.status, done.result.output) == ("finished", "echo: hi")
    # The root's end was recorded: the last heartbeat holds no running run.
    assert records[-1]["state"] == "[]"
    again = await run_tree(job, echo_specs(), _link([], 2, (records[-1],)), gate=None,
                           ledger_path=None)
    assert (again.result.status, again.result.error) == (
        "failed", "cannot resume from the heartbeat: 0 running root tasks in it, not 1")
