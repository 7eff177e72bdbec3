"""SqliteCheckpoints commits the rows of several runs in one transaction (review4): a
row whose state cannot be encoded (more than ``MAX_STATE_STEERING`` steering
messages waiting: anyone who may steer one run can queue them) fails its own run's
checkpoint only, never the checkpoints of the other runs batched with it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio
import trio.testing

from agentcore import Checkpoint, EventKind, Message
from agentcore._steering import InboxMessage
from agentcore.limits import MAX_STATE_STEERING
from agentcore.lowlevel import start_checkpoint
from subagent import CheckpointError, SqliteCheckpoints


def _point(run_id: str, steering: int) -> Checkpoint:
    point = start_checkpoint("sys", "go", run_id=run_id, agent="a", path=(run_id,))
    point.state.inbox = [InboxMessage(Message("user", f"s{k}"), EventKind.steering_injected,
                                 f"s{k}") for k in range(steering)]
    return point


async def test_a_row_that_cannot_be_encoded_fails_only_its_own_checkpoint(
    tmp_path: Path,
) -> None:
    db = tmp_path / "c.db"
    outcomes: dict[str, str | None] = {}
    async with SqliteCheckpoints(db, busy_timeout=60.0) as store:
        await store.write("a", None, None, _point("first", 0))
        # Another connection holds the write lock: the writer thread waits on the
        # next batch while the two rows below are batched together behind it.
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")

        async def write(run_id: str, steering: int) -> None:
            try:
                await store.write("a", None, None, _point(run_id, steering))
                outcomes[run_id] = None
            except CheckpointError as exc:
                outcomes[run_id] = str(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(write, "held", 0)
            await trio.testing.wait_all_tasks_blocked()  # handed to the writer
            with trio.fail_after(30):
                # The writer thread takes the held batch (no trio event tells it: poll).
                while store._pending is not None:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            nursery.start_soon(write, "flooded", MAX_STATE_STEERING + 1)
            nursery.start_soon(write, "other", 0)
            await trio.testing.wait_all_tasks_blocked()
            assert store._pending is not None
            assert sorted(row[0] for row in store._pending.rows) == ["flooded", "other"]
            blocker.execute("COMMIT")
        blocker.close()
        stored = {row.run_id for row in await store.rows()}
    assert outcomes == {
        "held": None,
        "other": None,
        "flooded": "cannot store a checkpoint: more than 1000 steering messages wait in "
                   "the run's inbox (MAX_STATE_STEERING): its state cannot be stored",
    }
    assert stored == {"first", "held", "other"}
