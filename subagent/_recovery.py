"""Crash recovery: each task's checkpointer, and resuming what a crash left unfinished.

A pool opened with ``checkpoints=`` gives each task's Agent a checkpointer
(:func:`commit_checkpoint`) that writes the task's row in the
:class:`SqliteCheckpoints`, linked to the run that delegated it by that run's id and
the delegating call's id. :func:`recover` reads the rows back, rebuilds each root
task's tree as a paused tree (a child whose delegating call was in flight is nested
in its parent's state, as a pause nests it) and resumes it with ``Pool.resume``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import agentcore
from agentcore import MAX_STATE_DEPTH

from ._bgresult import audit_entry
from ._checkpoints import CheckpointError, CheckpointRow, SqliteCheckpoints
from ._current import current_task
from ._errors import UnknownAgentError
from ._events import Event, EventKind

#: Seconds the audit entry of an orphan found at recovery may take.
END_BOUND = 5.0

if TYPE_CHECKING:
    from ._spec import Spec
    from ._stream import Stream
    from ._task import Task


class Pool(Protocol):
    """What :func:`recover` uses of a ``subagent.Pool``."""

    events: Stream | None

    @property
    def specs(self) -> dict[str, Spec]: ...

    async def resume(self, state: agentcore.RunState, *, name: str | None = None) -> Task: ...


async def commit_checkpoint(point: agentcore.Checkpoint) -> None:
    """The checkpointer of every checkpointed task's Agent: writes ``point`` in the
    row of the task whose run it is (``current_task``: the run's own task, or the
    task whose run a tool call runs in), linked to the run that delegated it. A
    checkpoint."""
    task = current_task.get()
    assert task is not None, "a checkpointed Agent runs only in its pool's tasks"
    store = task.pool.checkpoints
    assert store is not None
    parent = task.parent
    parent_run = parent._run.run_id if parent is not None and parent._run is not None else None
    call_id = task.call_id if parent_run is not None else None
    await store.write(task.name, parent_run, call_id, point)


async def recover(pool: Pool, store: SqliteCheckpoints) -> list[Task]:
    """Resume every root task ``store`` shows unfinished (``running`` at its last
    checkpoint: the process ended without it ending) from its last checkpoint, in
    ``pool``; returns their Tasks in the order they were first checkpointed. A
    checkpoint. A tree with a subagent paused for approval is left as it is.

    Raises:
      CheckpointError: the store cannot be read (see ``SqliteCheckpoints.rows``), or
        a tree is deeper than ``agentcore.MAX_STATE_DEPTH``.
      UnknownAgentError: a run's spec is not in ``pool``.
      agentcore.ResumeError: a recovered state cannot be resumed by its spec.
    """
    rows = await store.rows()
    by_call: dict[tuple[str | None, str | None], CheckpointRow] = {
        (r.parent, r.call_id): r for r in rows if r.parent is not None
    }
    # A background child (wait: false) is tied to its parent's run by the parent's
    # run id and the id of the call that started it; that call is not in flight.
    background: dict[str, list[CheckpointRow]] = {}
    for r in rows:
        if r.parent is not None and r.status in ("running", "paused"):
            background.setdefault(r.parent, []).append(r)
    ended = {r.run_id for r in rows if r.status == "ended"}
    for row in rows:
        if row.parent in ended and row.status == "running":
            await _orphan(pool, store, row)
    tasks = []
    for row in rows:
        if row.parent is None and row.status == "running":
            state = _tree(pool, row, by_call, background)
            if state.pending_approvals:
                # A subagent paused for a human before the crash: the tree waits for
                # answers (it stays in the file), it is not resumed here.
                continue
            tasks.append(await pool.resume(state, name=row.name))
    return tasks


#: The error of a checkpointed background child whose parent had ended at the crash.
ORPHANED = "its parent run had ended before the crash: not resumed"


async def _orphan(pool: Pool, store: SqliteCheckpoints, row: CheckpointRow) -> None:
    # A child still running at the crash whose parent run had ended (a background
    # child, critical or not yet cancelled): reported orphaned (audited in its
    # spec's sink, a task_orphaned event on the pool's stream), then marked ended in
    # the store so that a later recovery does not report it again. An orphan cannot
    # be refused: an entry that cannot be recorded is named in the event's error.
    assert row.state is not None
    spec = pool.specs.get(row.name)
    path = row.state.path
    error = ORPHANED
    if spec is not None and spec.audit is not None:
        failure = await audit_entry(
            spec.audit, EventKind.task_orphaned, END_BOUND, run_id=row.run_id, path=path,
            agent_id=spec.agent_id, call_id=row.call_id, error=ORPHANED,
            data={"agent": row.name, "parent": row.parent or ""},
        )
        if failure is not None:
            error = f"{ORPHANED}; AuditError: {failure}"
    if pool.events is not None:
        pool.events._send_reserved(
            Event(path, EventKind.task_orphaned, None, row.call_id, error=error)
        )
    point = agentcore.Checkpoint(agentcore.CheckpointKind.ended, row.state)
    await store.write(row.name, row.parent, row.call_id, point)


def _background_rows(
    row: CheckpointRow, background: dict[str, list[CheckpointRow]]
) -> list[CheckpointRow]:
    # The background children of ``row``'s run that were not done at the crash.
    return [r for r in background.get(row.run_id, []) if r.call_id not in row.in_flight]


def _tree(
    pool: Pool,
    root: CheckpointRow,
    by_call: dict[tuple[str | None, str | None], CheckpointRow],
    background: dict[str, list[CheckpointRow]],
) -> agentcore.RunState:
    # Deepest first, with an explicit stack: a child is recovered before its parent.
    order: list[tuple[CheckpointRow, int]] = []
    stack = [(root, 1)]
    while stack:
        row, depth = stack.pop()
        if depth > MAX_STATE_DEPTH:
            raise CheckpointError(
                f"checkpoint tree of run {root.run_id[:200]!r} deeper than {MAX_STATE_DEPTH}"
            )
        order.append((row, depth))
        for call_id in row.in_flight:
            child = by_call.get((row.run_id, call_id))
            if child is not None and child.status == "running":
                stack.append((child, depth + 1))
        for child in _background_rows(row, background):
            if child.status == "running":
                stack.append((child, depth + 1))
    recovered: dict[str, agentcore.RunState] = {}
    for row, _ in reversed(order):
        spec = pool.specs.get(row.name)
        if spec is None:
            raise UnknownAgentError(row.name, tuple(sorted(pool.specs)))
        assert row.state is not None
        children = {}
        for call_id in row.in_flight:
            child = by_call.get((row.run_id, call_id))
            if child is None:
                continue
            if child.status == "running":
                children[call_id] = recovered[child.run_id]
            elif child.status == "paused" and child.state is not None:
                children[call_id] = child.state
        repeatable = {t.name for t in spec.tools if agentcore.is_idempotent(t)}
        agentcore.recover_calls(row.state, set(row.in_flight), repeatable, children,
                                row.checkpoint)
        for child in _background_rows(row, background):
            # Resumed as a background child of the recovered parent (Pool.resume):
            # its result is delivered to it.
            kid = recovered[child.run_id] if child.status == "running" else child.state
            if kid is None:
                continue
            kid.background = agentcore.BackgroundChild(child.call_id or "", child.name)
            row.state.children.append(kid)
        recovered[row.run_id] = row.state
    return recovered[root.run_id]
