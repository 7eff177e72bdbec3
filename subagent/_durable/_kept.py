"""A background child's result kept in its own checkpoint row until its parent's
checkpoints hold it (a checkpointed pool only).

A background child (``wait: false``) that ends hands its result to its parent's run
inbox; the parent's row holds it only from the parent's next checkpoint on (after its
run reads it). So that a crash in between does not lose it (the child's row says
``ended``, the parent's does not hold it), :func:`write_kept` commits the result in
the child's row first (``SqliteCheckpoints.write_kept``: its ended state marked
``background``, with the message that delivers it, :func:`kept_state`), and
``recover`` nests that result in the recovered parent's state unless the parent's
conversation holds it already (``_durable._tree``).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import trio

from agentcore import BackgroundChild, RunState
from agentcore._run._state import Phase

from .._core._core import TaskStatus
from .._reply import outcome, result_message, with_output
from ._recovery import END_BOUND, _link
from ._store import CheckpointError

if TYPE_CHECKING:
    from .._pool._task import Task


def kept_state(child: Task, *, background: bool = True) -> RunState:
    """The result of ``child`` (a task that has ended) as a state its parent keeps:
    ended, marked ``background`` with the message that delivers it (``background``)
    or the answer of the call that delegated it (``wait: true``, finished). Not a
    checkpoint."""
    output, error = outcome(child)
    run_id = child._run.run_id if child._run is not None else "/".join(child.path)
    ended = RunState.begin([], run_id=run_id, agent=child.spec.agent_id,
                           path=child.path, input=child.input)
    ended.phase = Phase.ended
    ended.summary = child._summary
    if background:
        result = result_message(child).content
    else:
        assert output is not None
        result = with_output({"agent": child.name, "path": list(child.path)}, child, output)
    ended.background = BackgroundChild(child.call_id or "", child.name, result, output, error)
    return ended


async def end_row(task: Task) -> None:
    """In a checkpointed pool, store the end of ``task`` (a delegated child whose run
    ended; see ``_recovery.commit_checkpoint``, which holds its ``ended``
    checkpoint): with its result (:func:`write_kept`) when its parent's run is live,
    else its ended checkpoint alone. Until then its row holds its last checkpoint
    before the end (``running``): a crash in between recovers the child from there
    (its last model call is made again; no tool call runs again). Shielded, for at
    most :data:`~subagent._durable._recovery.END_BOUND` seconds each. A checkpoint."""
    if await write_kept(task):
        return
    held, task._held_end = task._held_end, None
    store = task.pool.checkpoints
    if held is None or store is None:
        await trio.lowlevel.checkpoint()
        return
    point, link = held
    with trio.move_on_after(END_BOUND, shield=True):
        with contextlib.suppress(CheckpointError):
            await store.write(task.name, *link, point)


async def write_kept(task: Task) -> bool:
    """In a checkpointed pool, commit the result of ``task`` (a child that ended, not
    paused: a background child, or a delegated one that finished) in its own row
    before its parent's run is handed it, when that run is live (see the module
    docstring). Shielded, for at most :data:`~subagent._durable._recovery.END_BOUND` seconds;
    a failure to store it is dropped (the result is still handed over; only a crash
    before the parent's next checkpoint loses it, as before). Returns whether it was
    stored. A checkpoint."""
    store = task.pool.checkpoints
    if store is None or task.call_id is None or task.status is TaskStatus.paused:
        return False
    target = task._node.deliver_to
    parent = target.handle if target is not None else task.parent
    run = parent._run if parent is not None else None
    if run is None or run.ended:
        return False  # orphaned, or kept in the parent's paused state (commit_paused)
    if target is None and outcome(task)[1] is not None:
        return False  # a failed delegated child: its call is recovered as interrupted
    state = kept_state(task, background=target is not None)
    with trio.move_on_after(END_BOUND, shield=True):
        with contextlib.suppress(CheckpointError):
            await store.write_kept(task.name, *_link(task), state)
            task._held_end = None
            return True
    return False
