"""A task ended: every step that follows the end of a task's run, in the order they
run, in one module.

``run_task`` (``_lifecycle``) tells the core how the run ended, then hands the task
here: :func:`resolve_at_once` when its end has nothing to wait for and nobody to
tell (no coroutine: a run's common end), else :func:`resolve`, which awaits
:func:`end_task`:

1. its summary, and its tree usage sealed (``PoolCore.seal``);
2. its children (:func:`end_children`): a tree that paused keeps its background
   children in its state (:func:`keep_background`); otherwise results still unread
   become orphans (:func:`orphan`, and :func:`orphan_kept` for results kept across a
   pause), a hard end (cancelled, aborted) cancels every descendant and waits for
   them, any other end cancels the background children that are not critical;
3. its end reported: ``task_finished`` or ``task_cancelled``, audited first
   (:func:`offer_entry`), then sent;
4. a delegated child's end durable in its checkpoint row (``_durable._kept.end_row``);
5. its fan-out slot and result settled (:func:`settle`): a background child's result
   offered to its parent run's inbox, or reported orphaned (:func:`orphan`);
6. the task resolved (``PoolCore.resolve``).

Every background child's result (or error) ends up exactly once either delivered
(read by its parent run's loop: ``result_delivered``) or orphaned (``task_orphaned``)
(SPEC 3.4, 3.5): it is offered to the parent run's inbox when the child's task ends;
a parent run that has ended refuses it (orphaned now), and results still unread when
the parent run ends are orphaned by the parent's end. A result kept for a paused
parent's state is delivered or orphaned after its resume (``_delegation._paused``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import trio

from agentcore import AuditError, BackgroundChild, InboxMessage, RunState, RunSummary
from agentcore._audit import record_fields_sync, record_within

from .._core._core import CancelCause, TaskStatus
from .._delegation._paused import ask_pause, has_kept, keeps_result, take_kept
from .._durable._kept import end_row, kept_state
from .._durable._recovery import commit_paused
from .._events import Event, EventKind, tagged_of
from .._reply import audit_entry, outcome, report_delivery, result_message

if TYPE_CHECKING:
    from agentcore import AgentPath, Usage
    from ledger import Record, Sink

    from .._stream import Stream
    from ._task import Task

# Read once: an enum member read goes through EnumType.__getattr__ (about 200 ns on
# Python 3.11), and every run's end compares with it.
_CANCELLED = TaskStatus.cancelled
_TASK_CANCELLED = EventKind.task_cancelled
# A cancel with no cause in the core came from outside the pool (its nursery).
_POOL_CLOSED = CancelCause.pool_closed

#: Seconds the shielded audit entries of a task's end (and of a cancelled task's
#: queueing) may take.
END_TIMEOUT = 5.0


def resolve_at_once(task: Task, status: TaskStatus) -> bool:
    """Tell the core how ``task``'s run ended (``status``) and, when its end has
    nothing to wait for (:func:`_end_at_once`), end the task and resolve it: through
    the pool's ``_apply``, like ``Task.cancel``. False when the end is left to
    :func:`resolve`. Not a checkpoint: no coroutine for a run's common end."""
    effects = task._core.run_ended(task._node, status)
    if effects:
        task._apply(effects)
    if not _end_at_once(task, status):
        return False
    task._apply(task._core.resolve(task._node))
    return True


def _end_at_once(task: Task, status: TaskStatus) -> bool:
    # end_task for a task whose end has nothing to wait for and nobody to tell (no
    # children, nothing unread or in the background, no sink, stream or observer, not
    # a background child, a cancel already reached): the same steps, without its
    # coroutine. False (and nothing done) otherwise.
    node = task._node
    if (
        (node.has_family and (
            node.children or node.unread or node.background or node.deliver_to is not None
        ))
        or (status is _CANCELLED and node.cancel_cause is None)
        or task._spec.audit is not None or task._events is not None
        or task._pool._observer is not None
        or (task._call_id is not None and task._pool.checkpoints is not None)
    ):
        return False
    task._end_summary()
    summary = task._summary
    core = task._core
    core.seal(node, summary.usage if summary is not None else None)
    # settle() with no parent run to deliver to: the result is kept (not an orphan).
    effects = core.settle(node, False)[1]
    if effects:
        task._apply(effects)
    return True


async def resolve(task: Task, status: TaskStatus) -> None:
    """The rest of :func:`resolve_at_once` when it returned False: end the task
    (:func:`end_task`), then resolve it. A checkpoint."""
    await end_task(task, status)
    task._apply(task._core.resolve(task._node))


async def end_task(task: Task, status: TaskStatus) -> None:
    """What follows the end of ``task``'s run (its slot and counts settled already):
    (shielded, time-bounded) end its children (see :func:`end_children`), report the
    end, and hand a background task's result to its parent run (or report it
    orphaned). A checkpoint; the pool resolves the task after it.
    """
    task._end_summary()
    hard = status is _CANCELLED
    node = task._node
    if (
        node.has_family and (node.unread or node.background or (hard and node.children))
    ) or has_kept(task):
        with trio.CancelScope(shield=True):
            await end_children(task, hard=hard, bound=END_TIMEOUT)
    elif hard and node.cancel_cause is None:
        # All that end_children does for a task with no children and nothing unread
        # (a cancel reached it already when the pool or the task was cancelled; else
        # the cancel came from outside the pool, through its nursery).
        task._cancel_for(_POOL_CLOSED)
    kind = EventKind.task_cancelled if hard else EventKind.task_finished
    summary = task._summary
    task._core.seal(node, summary.usage if summary is not None else None)
    if task.spec.audit is not None or task.events is not None or task.pool._observer is not None:
        await _report_end(task, kind)
    if task.call_id is not None and task.pool.checkpoints is not None:
        await end_row(task)  # its result durable before its parent's run is handed it
    if not settle(task):
        with trio.move_on_after(2 * END_TIMEOUT, shield=True):
            await orphan(task, bound=END_TIMEOUT)


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
        # Its descendants go for the cause it went for.
        task._cancel_for(task._node.cancel_cause or _POOL_CLOSED)
        for child in list(task.children):
            await child._wait_resolved()
        return
    stopped = [node.handle for node in task._node.background if not node.handle.spec.critical]
    for child in stopped:
        child._cancel_for(CancelCause.parent_ended)
    with trio.move_on_after(bound):
        for child in stopped:
            await child._wait_resolved()


async def keep_background(task: Task) -> None:
    """``task``'s run ended paused: pause its background children still running, wait
    for them, and nest every result it has not read in its run's state (see
    ``_delegation._paused``); in a checkpointed pool, commit the paused state again with them
    (``_recovery.commit_paused``). A checkpoint; call it shielded. Each child's wait
    is bounded by its own limits (its model call or tool calls in progress finish
    first)."""
    assert task._run is not None
    running = [node.handle for node in task._node.background]
    for child in running:
        ask_pause(child)
    for child in running:
        await child._wait_resolved()
    state = task._run.state
    before = len(state.children)
    for node in task._core.take_unread(task._node):
        child = node.handle
        mark = BackgroundChild(child.call_id or "", child.name)
        if child.status is TaskStatus.paused and child._run is not None:
            paused = child._run.state
            paused.background = mark
            state.children.append(paused)
            continue
        state.children.append(kept_state(child))
    state.children.extend(take_kept(task))
    if len(state.children) > before and task.pool.checkpoints is not None:
        # The run's paused checkpoint was taken before they were nested.
        await commit_paused(task)


async def orphan_kept(parent: Task, state: RunState, *, bound: float) -> AuditError | None:
    """Report a kept result its parent's run ended without reading (and not paused):
    ``task_orphaned``, as :func:`orphan` reports a live child's. A checkpoint;
    call it shielded, bounded by more than ``bound``."""
    mark = state.background
    assert mark is not None
    spec = parent.pool.specs.get(mark.name)
    summary = state.summary
    return await _report_orphan(
        spec.audit if spec is not None else None, parent.events, bound,
        state.run_id, state.path, state.agent, mark.call_id, mark.name,
        "/".join(parent.path), mark.output, mark.error, summary,
        summary.usage if summary is not None else None,
    )


async def _report_end(task: Task, kind: EventKind) -> None:
    # The task's end: its entry, shielded and bounded by END_TIMEOUT so that a hung
    # sink cannot hold back the event (no scope with a sink that never blocks: see
    # record_within), then its event (with the sink's failure as its error when it
    # has none), which never waits (see Stream).
    sink = task._spec.audit
    error = task._error
    if sink is not None:
        try:
            entry = offer_entry(
                task, sink, kind, task._summary, error, False,
                (task._node.cancel_cause or _POOL_CLOSED) if kind is _TASK_CANCELLED else None,
            )
            if entry is not None:
                await record_within(sink, entry, END_TIMEOUT, shield=True)
        except AuditError as failure:
            error = error or f"AuditError: {failure}"
    observe = task._pool._observer
    if task._events is not None or observe is not None:
        summary = task._summary
        usage = task.tree_usage if summary is not None else None
        tagged = tagged_of(task._path, kind, None, task._call_id, summary, error, usage)
        if observe is not None:
            observe(tagged)
        if task._events is not None:
            task._events._send_reserved(tagged)


# (offer_entry and _report_end read the task's private fields, not its read-only
# views: they run for every task.)
def offer_entry(
    task: Task, sink: Sink, kind: EventKind, summary: RunSummary | None, error: str | None,
    cancellable: bool, cause: CancelCause | None = None,
) -> Record | None:
    """The entry of one of ``task``'s lifecycle steps (queued, started, its end),
    recorded now if the sink can take it without waiting (``record_fields_sync``:
    ``cancellable``, or not for the entries of an end); else returned, unrecorded,
    for the caller to await. ``cause``: who cancelled it (``task_cancelled`` only),
    in its data. Not a checkpoint. Raises AuditError."""
    # (An enum's _value_ is the str it was defined with: str() of a StrEnum member
    # would copy it into a new str per entry, kept by the sink.)
    data: dict[str, str | int | float | bool | None] = {"agent": task._name}
    if summary is not None:
        data["end_reason"] = summary.end_reason._value_
    if task._history:
        # The run starts from earlier messages (submit's history), not in its own entries.
        data["history_messages"] = len(task._history)
    if cause is not None:
        data["cause"] = cause._value_
    path = task._path
    return record_fields_sync(
        sink, cancellable, kind._value_, "/".join(path), path, task._spec.agent_id,
        None, task._call_id, None, None, None, None, error, None, data,
    )


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
    read = functools.partial(parent._core.read, parent._node, task._node)
    await report_delivery(parent, task.call_id, task.name, task.path, output, error, read)


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
    target = task._node.deliver_to
    parent = "/".join(target.handle.path) if target is not None else ""
    # (Its tree usage is final: the task and its unread children are sealed.)
    return await _report_orphan(
        task.spec.audit, task.events, bound, "/".join(task.path), task.path,
        task.spec.agent_id, task.call_id, task.name, parent, output, error,
        task._summary, task.tree_usage,
    )


async def _report_orphan(
    sink: Sink | None, events: Stream | None, bound: float, run_id: str, path: AgentPath,
    agent_id: str, call_id: str | None, agent: str, parent: str, output: str | None,
    error: str | None, summary: RunSummary | None, tree_usage: Usage | None,
) -> AuditError | None:
    # The task_orphaned step of a result no run will read (a live child's, or one kept
    # across a pause): its entry in ``sink`` within ``bound``, then its event, sent
    # even when the entry failed (with the failure in its error). A lifecycle event:
    # it never waits (see Stream), so an orphan is never lost while the stream is open.
    failure: AuditError | None = None
    if sink is not None:
        failure = await audit_entry(
            sink, EventKind.task_orphaned, bound, run_id=run_id, path=path,
            agent_id=agent_id, call_id=call_id, result=output, error=error,
            data={"agent": agent, "parent": parent},
        )
    if events is not None:
        reported = error
        if failure is not None:
            reported = "; ".join(filter(None, (error, f"AuditError: {failure}")))
        events._send_reserved(Event(path, EventKind.task_orphaned, None, call_id, summary,
                                    reported, output=output, tree_usage=tree_usage))
    return failure
