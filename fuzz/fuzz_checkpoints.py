"""``SqliteCheckpoints.rows``: the rows of a checkpoint file or a ``CheckpointError``.

Each input is a checkpoint database: a sound one (a root and a child, running, and
an ended run) whose columns are set at random to values of any type (texts,
numbers, blobs, NULL, huge ids, states from another run, JSON that is not a list of
ids), or whose file bytes are flipped, cut or replaced by the input. Whatever reads
back must be recoverable: ``agentcore.lowlevel.recover_calls`` on each state raises nothing.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile

import trio

import agentcore
from agentcore import Message, RunState, ToolCall
from agentcore._run._checkpoint import snapshot
from subagent import CheckpointError, SqliteCheckpoints
from subagent._durable._schema import SCHEMA as _SCHEMA
from subagent._durable._schema import UPSERT as _UPSERT

from ._bytes import ByteReader
from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (CheckpointError,)
_COLUMNS = ("run_id", "name", "parent", "call_id", "status", "seq", "in_flight", "state")


def _state(run_id: str) -> str:
    call = ToolCall("c1", "subagent", '{"agent": "w", "task": "t"}')
    state = RunState.begin([Message("user", "go"), Message("assistant", "", tool_calls=[call])],
                           run_id=run_id, agent="w", input="go")
    return snapshot(state).to_json()


def _sound(path: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript(_SCHEMA)
        conn.execute(_UPSERT, ("r/1", "w", None, None, "running", '["c1"]', _state("r/1")))
        conn.execute(_UPSERT, ("r/1/w/2", "w", "r/1", "c1", "running", "[]", _state("r/1/w/2")))
        conn.execute(_UPSERT, ("r/3", "w", None, None, "ended", "[]", ""))
    conn.close()


def _value(r: ByteReader) -> object:
    kind = r.below(9)
    if kind == 0:
        return r.text()
    if kind == 1:
        return r.number() if r.below(2) else r.choice((0, -1, 2**63 - 1, 1e308))
    if kind == 2:
        return None
    if kind == 3:
        return r.text().encode("utf-8", "surrogatepass")
    if kind == 4:
        return r.choice(("running", "paused", "ended", "RUNNING", ""))
    if kind == 5:
        return r.choice(('["c1"]', "[]", '[1]', '{"a": 1}', "[" * 5000, '["' + "x" * 9000 + '"]'))
    if kind == 6:
        return _state(r.choice(("r/1", "r/1/w/2", "other")))
    if kind == 7:
        return "x" * r.below(10000)
    return r.choice(("r/1", "r/1/w/2", "r/3", "c1"))


def _damage(r: ByteReader, path: str, data: bytes) -> None:
    how = r.below(6)
    if how == 0:
        with open(path, "wb") as f:
            f.write(data)
        return
    _sound(path)
    if how == 1:
        with open(path, "rb") as f:
            raw = bytearray(f.read())
        for _ in range(1 + r.below(8)):
            raw[r.below(len(raw))] = r.byte()
        with open(path, "wb") as f:
            f.write(raw if r.below(2) else raw[: r.below(len(raw))])
        return
    with sqlite3.connect(path) as conn:
        for _ in range(1 + r.below(4)):
            column = r.choice(_COLUMNS)
            where = r.choice(("r/1", "r/1/w/2", "r/3"))
            conn.execute(f"UPDATE OR IGNORE checkpoints SET {column} = ? WHERE run_id = ?",
                         (_value(r), where))
    conn.close()


def target(data: bytes) -> None:
    r = ByteReader(data)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ckpt.db")
        try:
            _damage(r, path, data[1:])
        except (sqlite3.Error, OverflowError, UnicodeEncodeError):
            return  # the edit itself was refused (a NOT NULL column): nothing to read
        rows = trio.run(SqliteCheckpoints(path, max_state_bytes=1 << 16).rows)
    for row in rows:
        assert row.status in ("running", "paused", "ended")
        if row.state is not None:
            assert row.state.run_id == row.run_id
            agentcore.lowlevel.recover_calls(
                row.state, set(row.in_flight), set(), {}, row.checkpoint
            )


if __name__ == "__main__":
    main(target, ALLOWED)
