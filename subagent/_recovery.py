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

from ._checkpoints import CheckpointError, CheckpointRow, SqliteCheckpoints
from ._current import current_task
from ._errors import UnknownAgentError

if TYPE_CHECKING:
    from ._spec import Spec
    from ._task import Task


class Pool(Protocol):
    """What :func:`recover` uses of a ``subagent.Pool``."""

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
    _check_unique(rows)
    by_call: dict[tuple[str | None, str | None], CheckpointRow] = {
        (r.parent, r.call_id): r for r in rows if r.parent is not None
    }
    tasks = []
    for row in rows:
        if row.parent is None and row.status == "running":
            state = _tree(pool, row, by_call)
            if state.pending_approvals:
                # A subagent paused for a human before the crash: the tree waits for
                # answers (it stays in the file), it is not resumed here.
                continue
            tasks.append(await pool.resume(state, name=row.name))
    return tasks


def _tree(
    pool: Pool, root: CheckpointRow, by_call: dict[tuple[str | None, str | None], CheckpointRow]
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
    recovered: dict[str, agentcore.RunState] = {}
    for row, _ in reversed(order):
        spec = pool.specs.get(row.name)
        if spec is None:
            raise UnknownAgentError(row.name, tuple(sorted(pool.specs)))
        assert row.state is not None
        _check_row(row, row.state, spec)
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
        recovered[row.run_id] = row.state
    return recovered[root.run_id]


def _check_unique(rows: list[CheckpointRow]) -> None:
    # One row per run id (the table's key; a hand-made table may lack it): a run id
    # stored twice makes the parent links a graph whose paths grow as 2**depth.
    seen: set[str] = set()
    for row in rows:
        if row.run_id in seen:
            raise CheckpointError(f"the checkpoints hold run {row.run_id[:200]!r} twice "
                                  "(edited or damaged); refusing to recover them")
        seen.add(row.run_id)


def _check_row(row: CheckpointRow, state: agentcore.RunState, spec: Spec) -> None:
    # The row's name and in-flight ids are outside the state's digest: they must agree
    # with it, else an edit there repeats a call the never-repeat rule holds back.
    where = f"checkpoint of run {row.run_id[:200]!r}"
    if state.agent != spec.agent_id:
        raise CheckpointError(
            f"{where} names spec {row.name[:200]!r}, but its state is a run of agent "
            f"{state.agent[:200]!r}; refusing to recover it"
        )
    if row.status != "running":
        return
    waiting = [p.call.id for p in state.pending if p.status is agentcore.CallStatus.waiting]
    if waiting and waiting[0] not in row.in_flight:
        # A ``call`` checkpoint is taken just before its call, the first without a result.
        raise CheckpointError(
            f"{where} does not match its state: call {waiting[0][:200]!r} has no result "
            "and is not among its in-flight calls (edited or damaged); refusing to recover it"
        )
