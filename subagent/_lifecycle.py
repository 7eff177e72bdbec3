"""The life of one task in the pool's nursery: queued, started, its run, its end."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import attrs
import trio

import agentcore
from agentcore import Agent, AuditError, EndReason, RunSummary
from agentcore._audit import record, record_within
from ledger import Record, Sink

from ._background import end_children, orphan, settle
from ._core import TaskStatus
from ._current import current_task
from ._delegation import SubagentTool, limit_delegation
from ._events import Event, EventKind
from ._results import SubagentResultsTool
from ._spec import agent_settings
from ._task import Task, end_status

#: Appended to every subagent's system prompt (SPEC 3.4, isolation).
FRAMING = (
    "You are a subagent: another agent delegated exactly one task to you, given in the "
    "next message. Work on that task alone. Your final answer is returned to your caller, "
    "who sees nothing else of this conversation, so make it complete and self-contained."
)

_NO_LIMITS = contextlib.nullcontext()

#: Seconds the shielded audit entries of a task's end (and of a cancelled task's
#: queueing) may take.
END_TIMEOUT = 5.0


def build_agent(task: Task) -> Agent:
    """A fresh Agent for ``task``: its spec's configuration plus the subagent framing.

    At the depth limit the delegation tools (:class:`SubagentTool`,
    :class:`SubagentResultsTool`) are left out, so the model is not offered them;
    with ``Spec.delegates_to`` the delegation tool offers only those agents.
    """
    spec = task.spec
    tools = spec.tools
    if task._node.depth >= task.pool.max_depth:
        tools = tuple(t for t in tools if not isinstance(t, SubagentTool | SubagentResultsTool))
    elif spec.delegates_to is not None:
        tools = limit_delegation(tools, spec.delegates_to)
    prompt = f"{spec.system_prompt}\n\n{FRAMING}" if spec.system_prompt else FRAMING
    limits: dict[str, Any] = {}
    if spec.max_turns is not None:
        limits["max_turns"] = spec.max_turns
    assert spec.model is not None
    return Agent(
        model=spec.model,
        tools=tools,
        system_prompt=prompt,
        agent_id=spec.agent_id,
        gate=spec.gate,
        audit=spec.audit,
        max_messages=spec.max_messages,
        **limits,
        **agent_settings(spec),
    )


def _emitter(task: Task) -> agentcore.EventSink | None:
    # None when nothing would see the run's events: no destination and no
    # idle_timeout on its path to push back (a delegating tool reads the id of the
    # call it runs in from agentcore.current_tool_call(), not from events). The run
    # then skips its start and end emits.
    destination = task.events
    if destination is None:
        above: Task | None = task
        while above is not None and above.spec.idle_timeout is None:
            above = above.parent
        if above is None:
            return None
    path = task.path
    call_id = task.call_id
    start_dropped = False

    async def emit(event: agentcore.Event) -> None:
        # The run's events wait for room within the task's limits; once the run has
        # ended (its summary is set), its end never waits: see Stream.
        nonlocal start_dropped
        task._progress()
        kind = event.kind
        if destination is None:
            return
        run = task._run
        if run is not None and run.summary is not None:
            if start_dropped and kind is agentcore.EventKind.agent_end:
                destination._drop_unpaired(Event(path, kind, event, call_id))
            else:
                destination._send_reserved(Event(path, kind, event, call_id))
        elif kind is agentcore.EventKind.agent_start:
            dropped = destination._dropped
            await destination.send(Event(path, kind, event, call_id))
            start_dropped = destination._dropped != dropped
        else:
            await destination.send(Event(path, kind, event, call_id))

    return emit


def _record(task: Task, kind: EventKind, summary: RunSummary | None, error: str | None) -> Record:
    data: dict[str, str | int | float | bool | None] = {"agent": task.name}
    if summary is not None:
        data["end_reason"] = str(summary.end_reason)
    return Record(
        str(kind),
        run_id="/".join(task.path),
        path=task.path,
        agent_id=task.spec.agent_id,
        call_id=task.call_id,
        error=error,
        data=data,
    )


async def _report_start(task: Task, kind: EventKind) -> AuditError | None:
    # A queued or started step: audited in the task's sink first, then sent as an
    # event, which never waits (see Stream). If the sink fails, the AuditError is
    # returned and nothing is announced: a start that cannot be audited does not run.
    sink = task.spec.audit
    if sink is not None:
        failure = await _audit(sink, _record(task, kind, None, None))
        if failure is not None:
            return failure
    if task.events is not None:
        task.events._send_reserved(Event(task.path, kind, None, task.call_id))
    return None


async def _report_end(task: Task, kind: EventKind) -> None:
    # The task's end: its entry, shielded and bounded by END_TIMEOUT so that a hung
    # sink cannot hold back the event, then its event (with the sink's failure as
    # its error when it has none), which never waits (see Stream).
    sink = task.spec.audit
    error = task._error
    if sink is not None:
        entry = _record(task, kind, task._summary, error)
        try:
            await record_within(sink, entry, END_TIMEOUT, shield=True)
        except AuditError as failure:
            error = error or f"AuditError: {failure}"
    if task.events is not None:
        summary = task._summary
        usage = task.tree_usage if summary is not None else None
        task.events._send_reserved(
            Event(task.path, kind, None, task.call_id, summary, error, tree_usage=usage)
        )


async def _audit(sink: Sink, entry: Record) -> AuditError | None:
    # Record one lifecycle entry; a sink that fails is returned as an AuditError.
    try:
        await record(sink, entry)
    except AuditError as failure:
        return failure
    return None


async def _execute(task: Task) -> TaskStatus:
    spec = task.spec
    run = build_agent(task).new_run(
        task.input, path=task.path, emit=_emitter(task), run_id="/".join(task.path)
    )
    task._attach(run)
    token = current_task.set(task)
    # One scope for both limits: its deadline is the earlier of the wall deadline and
    # the idle one (Task._progress pushes the latter back); which fired is told by
    # the wall deadline. A run with neither limit runs without one.
    now = trio.current_time()
    wall = now + spec.timeout if spec.timeout is not None else math.inf
    limits: trio.CancelScope | contextlib.nullcontext[None] = _NO_LIMITS
    if spec.timeout is not None or spec.idle_timeout is not None:
        limits = task._limit(
            wall if spec.idle_timeout is None else min(wall, now + spec.idle_timeout), wall
        )
    try:
        with limits:
            result = await run.run()
            task._conclude(result.output, result.summary, result.exception, result.summary.error)
            return end_status(result.summary.end_reason)
    finally:
        task._unlimit()
        current_task.reset(token)
    assert run.summary is not None
    if trio.current_time() >= wall:
        text = f"timed out after {spec.timeout:g}s"
    else:
        text = f"was idle for {spec.idle_timeout:g}s: no event within its idle_timeout"
    task._conclude(
        "", attrs.evolve(run.summary, end_reason=EndReason.timeout, error=text), None, text
    )
    return TaskStatus.timed_out


async def run_task(task: Task) -> TaskStatus:
    """Take ``task`` from queued to the end of its run; the pool's runner awaits it in
    the pool's nursery, then :func:`end_task`. A checkpoint.

    It reports ``task_queued``, waits for a slot, reports ``task_started`` and runs.

    Returns:
      How the run ended (``cancelled``: cancelled before or while it ran).
    """
    status = TaskStatus.cancelled
    failure: AuditError | None = None
    with task._scope:
        if task._scope.cancel_called:
            # A task cancelled before its runner ran still reports that it was queued.
            with trio.move_on_after(END_TIMEOUT, shield=True):
                failure = await _report_start(task, EventKind.task_queued)
        else:
            failure = await _report_start(task, EventKind.task_queued)
        await task._granted.wait()
        if failure is None:
            failure = await _report_start(task, EventKind.task_started)
        if failure is None:
            status = await _execute(task)
        else:
            # Fail closed: a task whose queueing or start cannot be audited does not run.
            task._conclude("", None, failure, f"AuditError: {failure}")
            status = TaskStatus.failed
    return status


async def end_task(task: Task, status: TaskStatus) -> None:
    """What follows the end of ``task``'s run (its slot and counts settled already):
    (shielded, time-bounded) end its children (see :func:`end_children`), report the
    end, and hand a background task's result to its parent run (or report it
    orphaned). A checkpoint; the pool resolves the task after it.
    """
    task._end_summary()
    hard = status is TaskStatus.cancelled
    node = task._node
    if node.unread or node.background or (hard and node.children):
        with trio.CancelScope(shield=True):
            await end_children(task, hard=hard, bound=END_TIMEOUT)
    elif hard:
        # All that end_children does for a task with no children and nothing unread.
        task.cancel()
    kind = EventKind.task_cancelled if hard else EventKind.task_finished
    summary = task._summary
    task._core.seal(node, summary.usage if summary is not None else None)
    if task.spec.audit is not None or task.events is not None:
        await _report_end(task, kind)
    if not settle(task):
        with trio.move_on_after(2 * END_TIMEOUT, shield=True):
            await orphan(task, bound=END_TIMEOUT)
