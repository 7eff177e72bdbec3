"""Background delegation: a child's result delivered into its parent run as a message,
orphans, and what the end of a parent run does to its children (SPEC 3.4, 3.5).

Every background child's result (or error) ends up exactly once either delivered
(read by its parent run's loop: ``result_delivered``) or orphaned (``task_orphaned``):
it is offered to the parent run's inbox when the child's task ends; a parent run
that has ended refuses it (orphaned now), and results still unread when the parent
run ends are orphaned by the parent's end.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import trio

from agentcore import AuditError, InboxMessage

from .._events import Event, EventKind
from .._reply import RESULT_PREFIX as RESULT_PREFIX
from .._reply import audit_delivery, audit_entry, outcome, result_message
from ._paused import keep_background, keeps_result, orphan_kept, take_kept

if TYPE_CHECKING:

    from .._pool._task import Task

def settle(task: Task) -> bool:
    """Account for a task that has ended and reported its end (see
    ``PoolCore.settle``: its fan-out slot, its tree usage, and a background task's
    result offered to its parent run's inbox). Not a checkpoint.

    Returns False when the result is an orphan (the parent run has ended): the caller
    then reports it with :func:`orphan`.
    """
    target = task._node.deliver_to
    run = target.handle._run if target is not None else None
    inbox_open = run is not None and not run.ended
    # A result kept for the state of a parent that paused (see _delegation._paused): unread,
    # not offered to its inbox; the parent's end nests it in its RunState.
    keep = target is not None and run is not None and keeps_result(run, task)
    kept, effects = task._core.settle(task._node, inbox_open or keep)
    task._apply(effects)
    if target is not None and inbox_open and not keep:
        assert run is not None
        parent = target.handle
        read = functools.partial(_delivered, parent, task)
        run.put(InboxMessage(result_message(task), None, on_read=read, preempts=False))
    return kept


async def _delivered(parent: Task, task: Task) -> None:
    # Awaited by the parent run's loop right after it appended the result message.
    # Fail closed: a delivery that cannot be audited raises AuditError (the run ends
    # ``error``), and the result stays unread, so the parent's end orphans it.
    output, error = outcome(task)
    await audit_delivery(parent, task.call_id, task.name, task.path, output, error)
    parent._core.read(parent._node, task._node)
    if parent.events is not None:
        await parent.events.send(
            Event(
                parent.path,
                EventKind.result_delivered,
                None,
                parent.call_id,
                error=error,
                child=task.path,
                output=output,
            )
        )


async def orphan(task: Task, *, bound: float) -> AuditError | None:
    """Report that a background task's result arrived after its parent run ended:
    audited in the task's sink, then a ``task_orphaned`` event (which never waits for
    room in the stream). A checkpoint; call it shielded, bounded by more than ``bound``.

    An orphan cannot be refused, so an entry that fails, or is not recorded within
    ``bound`` seconds, does not stop the event: the event's ``error`` says so (after
    the task's own error, if any).

    Returns:
      The AuditError of an entry that could not be recorded, else None.
    """
    output, error = outcome(task)
    sink = task.spec.audit
    failure: AuditError | None = None
    if sink is not None:
        target = task._node.deliver_to
        parent = target.handle if target is not None else None
        failure = await audit_entry(
            sink,
            EventKind.task_orphaned,
            bound,
            run_id="/".join(task.path),
            path=task.path,
            agent_id=task.spec.agent_id,
            call_id=task.call_id,
            result=output,
            error=error,
            data={
                "agent": task.name,
                "parent": "/".join(parent.path) if parent is not None else "",
            },
        )
    if task.events is not None:
        reported = error
        if failure is not None:
            reported = "; ".join(filter(None, (error, f"AuditError: {failure}")))
        # A lifecycle event: it never waits (see Stream), so an orphan is never lost
        # while the stream is open.
        task.events._send_reserved(
            Event(
                task.path,
                EventKind.task_orphaned,
                None,
                task.call_id,
                task._summary,
                reported,
                output=output,
                tree_usage=task.tree_usage,
            )
        )
    return failure


async def end_children(task: Task, *, hard: bool, bound: float) -> None:
    """What the end of ``task``'s run does to its children. A checkpoint; call it shielded.

    Results in its inbox still unread become orphans (each report bounded by
    ``bound`` seconds). A hard end (``hard``: the task was cancelled or aborted)
    cancels every descendant, critical ones included, and waits for them all. Any
    other end cancels the background children that are not critical, waits for them
    at most ``bound`` seconds, and leaves critical ones running.
    """
    if task._run is not None and task._run.state.paused:
        # The tree paused: its background children become part of the state.
        await keep_background(task)
        return
    for kept in take_kept(task):
        with trio.move_on_after(2 * bound):
            await orphan_kept(task, kept, bound=bound)
    for node in task._core.take_unread(task._node):
        child = node.handle
        # The entry and the event are bounded apart: a hung sink cannot hold back the event.
        with trio.move_on_after(2 * bound):
            await orphan(child, bound=bound)
    if hard:
        task.cancel()
        for child in list(task.children):
            await child._wait_resolved()
        return
    stopped = [node.handle for node in task._node.background if not node.handle.spec.critical]
    for child in stopped:
        child.cancel()
    with trio.move_on_after(bound):
        for child in stopped:
            await child._wait_resolved()
