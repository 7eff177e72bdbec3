"""The checkpoints of an activity attempt's pool, kept in memory and heartbeated.

:class:`HeartbeatCheckpoints` is the store ``open_pool(checkpoints=...)`` gets in an
activity: it keeps the last checkpoint of every run of the tree (the rows
``subagent.SqliteCheckpoints`` keeps, with the same meaning, but in memory) and,
at every checkpoint, hands the encoded rows of the runs still running or paused to
an awaited callback that records them as the activity's heartbeat *on the server*
before the run goes on. A ``call`` checkpoint is taken before each call of a tool
that is not read-only, so the call runs only once the server holds a heartbeat
showing it in flight. A retried attempt decodes the rows (:func:`decode_rows`,
outside input: size cap, exact shape, ``RunState.from_json`` for each state) and
``subagent._durable._recovery.recover`` rebuilds and resumes the tree with the never-repeat
rule, as after a local crash.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
import msgspec
import trio

import agentcore

from .._durable._store import CheckpointError, CheckpointRow, SqliteCheckpoints, UnreadRow
from .._durable._writes import Claim
from ._inputs import wire_size

#: The most runs a heartbeated tree may hold.
MAX_HEARTBEAT_RUNS = 10_000
#: The most bytes of checkpoints one heartbeat carries, as sent (:func:`wire_size`;
#: Temporal refuses a payload over 2 MiB by default). A bigger tree is heartbeated as
#: :data:`TOO_LARGE`: the run goes on, but a retried attempt refuses to resume (it
#: must not start over).
MAX_RECORDED_CHARS = 1024 * 1024
#: The heartbeat state of a tree whose checkpoints were over the cap.
TOO_LARGE = ""

# run_id, name, parent, call_id, status, seq, in_flight, state (RunState JSON)
_Row = tuple[str, str, str | None, str | None, str, int, list[str], str]
_rows = msgspec.json.Decoder(list[_Row])


@attrs.define(eq=False)
class HeartbeatCheckpoints(SqliteCheckpoints):
    """The last checkpoint of every run of one attempt's tree, in memory, each one
    recorded by ``record`` (awaited) before the run goes on.

    Args:
      record: Records the encoded rows (see :func:`decode_rows`) durably, e.g. as
        the activity's heartbeat; a checkpoint; what it raises ends the run
        ``error`` (as a failed ``SqliteCheckpoints`` write does).
      start: The rows a retried attempt starts from (decoded from the heartbeat).
      resuming: Whether a retried attempt resumes from ``start`` (even empty: then
        nothing is left to resume).
      max_chars: The most characters of checkpoints recorded (else :data:`TOO_LARGE`).
    """

    record: Callable[[str], Awaitable[None]] = attrs.field(kw_only=True)
    start: list[CheckpointRow] = attrs.field(kw_only=True, factory=list)
    resuming: bool = attrs.field(kw_only=True, default=False)
    max_chars: int = attrs.field(kw_only=True, default=MAX_RECORDED_CHARS)
    _kept: dict[str, _Row] = attrs.field(factory=dict, init=False)
    _send: trio.Lock = attrs.field(factory=trio.Lock, init=False)

    def __attrs_post_init__(self) -> None:
        for row in self.start:
            state = row.state.to_json() if row.state is not None else ""
            self._kept[row.run_id] = (row.run_id, row.name, row.parent, row.call_id,
                                      row.status, row.seq, list(row.in_flight), state)

    def __repr__(self) -> str:
        return f"<HeartbeatCheckpoints runs={len(self._kept)} commits={self.commits}>"

    async def write(
        self, name: str, parent: str | None, call_id: str | None, point: agentcore.Checkpoint
    ) -> None:
        """Keep ``point`` as its run's last checkpoint and record the tree. A checkpoint.

        Raises:
          CheckpointError: the tree could not be recorded (the message says why).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        kind = point.kind
        if kind is agentcore.CheckpointKind.start:
            # Not heartbeated (one more heartbeat per task): a retried attempt starts
            # its tree again from the workflow's input and its runs' checkpoints.
            return
        state = point.state
        status = {"turn": "running", "call": "running"}.get(kind, kind.value)
        # Encoded now: a paused run's own state changes once the checkpointer returns.
        body = "" if kind is agentcore.CheckpointKind.ended else state.to_json()
        old = self._kept.get(state.run_id)
        seq = old[5] + 1 if old is not None else 1
        self._kept[state.run_id] = (state.run_id, name, parent, call_id, status, seq,
                                    list(point.in_flight), body)
        with trio.CancelScope(shield=True):
            # The latest tree is encoded under the lock: the last one sent is the newest.
            async with self._send:
                text = self.encoded()
                if wire_size(text) > self.max_chars:  # as the heartbeat carries it
                    text = TOO_LARGE
                try:
                    await self.record(text)
                except CheckpointError:
                    raise
                except Exception as exc:
                    raise CheckpointError(
                        f"cannot record a checkpoint: {type(exc).__name__}") from None
        self.commits += 1

    async def write_kept(
        self, name: str, parent: str | None, call_id: str | None, state: agentcore.RunState
    ) -> None:
        """Not heartbeated (only running and paused rows are): a retried attempt does
        not hold a background result its parent had not read. A checkpoint."""
        await trio.lowlevel.checkpoint()

    async def take_claim(self, name: str, state: agentcore.RunState, key: str) -> Claim:
        """Nothing to record: the workflow resumes each paused state once (its answer
        is an event of its history), so ``Pool.resume`` goes on. A checkpoint."""
        await trio.lowlevel.checkpoint()
        return Claim(state.run_id, key, (state.run_id, name, None, None, "running", "[]", ""),
                     taken=True)

    async def unclaim(self, claim: Claim) -> None:
        """Nothing recorded, nothing to undo. A checkpoint."""
        await trio.lowlevel.checkpoint()

    def encoded(self) -> str:
        """The rows of the runs still running or paused, as JSON. Not a checkpoint."""
        live = [row for row in self._kept.values() if row[4] != "ended"]
        return msgspec.json.encode(live).decode()

    async def rows(self) -> list[CheckpointRow]:
        """The rows this attempt started from (what ``recover`` resumes). A checkpoint."""
        await trio.lowlevel.checkpoint()
        return list(self.start)

    async def run_ids(self) -> list[str]:
        """The run ids of the rows this attempt started from (the pool numbers its
        tasks past them; there is no file). A checkpoint."""
        await trio.lowlevel.checkpoint()
        return [row.run_id for row in self.start]

    async def recovering(self) -> list[CheckpointRow | UnreadRow]:
        """The rows this attempt started from (what ``recover`` resumes; no lock: the
        server runs one attempt at a time). A checkpoint."""
        await trio.lowlevel.checkpoint()
        return list(self.start)

    async def aclose(self) -> None:
        """Nothing to close (no file, no thread). A checkpoint."""
        await trio.lowlevel.checkpoint()


def decode_rows(text: str, max_chars: int) -> list[CheckpointRow]:
    """The rows in a heartbeat's ``state`` (outside input). Not a checkpoint.

    Raises:
      CheckpointError: over ``max_chars``, not the shape :class:`HeartbeatCheckpoints`
        writes, more than :data:`MAX_HEARTBEAT_RUNS` runs, or a state refused by
        ``RunState.from_json``; the message names what was wrong.
    """
    if text == TOO_LARGE:
        raise CheckpointError("the tree's checkpoints were too large to heartbeat "
                              f"(over {MAX_RECORDED_CHARS} characters)")
    if len(text) > max_chars:
        raise CheckpointError(f"heartbeat state over {max_chars} characters")
    try:
        raw = _rows.decode(text)
    except msgspec.DecodeError as exc:
        raise CheckpointError(f"malformed heartbeat state: {str(exc)[:200]}") from None
    if len(raw) > MAX_HEARTBEAT_RUNS:
        raise CheckpointError(f"heartbeat state with more than {MAX_HEARTBEAT_RUNS} runs")
    rows = []
    for run_id, name, parent, call_id, status, seq, in_flight, body in raw:
        where = f"heartbeated checkpoint of run {run_id[:200]!r}"
        if status not in ("running", "paused") or seq < 1:
            raise CheckpointError(f"malformed {where}: bad status or counter")
        try:
            state = agentcore.RunState.from_json(body)
        except agentcore.RunStateError as exc:
            raise CheckpointError(f"{where} refused: {exc}") from None
        if state.run_id != run_id:
            raise CheckpointError(f"malformed {where}: its state is another run's")
        rows.append(CheckpointRow(run_id, name, parent, call_id, status, seq,
                                  tuple(in_flight), state))
    return rows
