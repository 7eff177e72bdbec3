"""The life of one task in the pool's nursery: queued, started, its run, its end."""

from __future__ import annotations

import math
import sys
import weakref
from typing import Any

import attrs
import trio

import agentcore
from agentcore import Agent, AuditError, EndReason
from agentcore._audit import record
from ledger import Record, Sink

from .._core._core import TaskStatus
from .._cost._shell import budgeted_model
from .._cost._shell import settle as settle_budget
from .._current import current_task
from .._delegation._paused import pause_asked, start_background, take_background
from .._delegation._results import SubagentResultsTool
from .._delegation._tool import SubagentTool, limit_delegation, start_child
from .._durable._recovery import commit_checkpoint, commit_start, end_unstarted, start_done
from .._durable._store import CheckpointError
from .._events import EventKind, tagged_of
from .._result import end_status
from .._specs._spec import Spec, agent_settings
from ._emitter import emitter
from ._ending import END_TIMEOUT as END_TIMEOUT
from ._ending import offer_entry, resolve, resolve_at_once
from ._scopes import exit_scope
from ._task import Task

#: Appended to every subagent's system prompt (SPEC 3.4, isolation).
FRAMING = (
    "You are a subagent: another agent delegated exactly one task to you, given in the "
    "next message. Work on that task alone. Your final answer is returned to your caller, "
    "who sees nothing else of this conversation, so make it complete and self-contained."
)

# Read once: an enum member read goes through EnumType.__getattr__ (about 200 ns on
# Python 3.11), and every run's end compares with it.
_CANCELLED = TaskStatus.cancelled


def build_agent(task: Task) -> Agent:
    """The Agent for ``task``: its spec's configuration plus the subagent framing.

    At the depth limit the delegation tools (:class:`SubagentTool`,
    :class:`SubagentResultsTool`) are left out, so the model is not offered them;
    with ``Spec.delegates_to`` the delegation tool offers only those agents.

    An Agent is configuration only and depends on nothing but the spec and whether
    the task is at the depth limit, so the tasks of one spec share it (one Agent per
    spec and depth class, dropped with the spec): building one per task cost each
    run about a kilobyte and its validation.
    """
    spec = task.spec
    at_limit = task._node.depth >= task.pool.max_depth
    assert spec.model is not None
    model = budgeted_model(task, spec.model)
    if task.pool.checkpoints is not None:
        # Checkpointed: its Agent carries the checkpointer (not shared with other pools).
        return _new_agent(spec, at_limit, model, commit_checkpoint)
    if model is not spec.model:
        # A budget covers this task: its run calls the model through its own meter.
        return _new_agent(spec, at_limit, model)
    key = id(spec)
    cached = _agents.get(key)
    if cached is not None and cached[0]() is spec:
        agent: Agent | None = cached[2] if at_limit else cached[1]
        if agent is None:
            agent = _new_agent(spec, at_limit, model)
            cached[2 if at_limit else 1] = agent
        return agent
    agent = _new_agent(spec, at_limit, model)
    ref = weakref.ref(spec, lambda ref: _forget(key, ref))
    _agents[key] = [ref, None, agent] if at_limit else [ref, agent, None]
    return agent


# id(spec) -> [a weak reference to the spec, its Agent below the depth limit, its
# Agent at the limit]; an entry goes when its spec is collected (ids are reused).
_agents: dict[int, list[Any]] = {}


def _forget(key: int, ref: weakref.ref[Spec]) -> None:
    cached = _agents.get(key)
    if cached is not None and cached[0] is ref:
        del _agents[key]


def _new_agent(
    spec: Spec, at_limit: bool, model: agentcore.ChatModel,
    checkpoint: agentcore.Checkpointer | None = None,
) -> Agent:
    tools = spec.tools
    if at_limit:
        tools = tuple(t for t in tools if not isinstance(t, SubagentTool | SubagentResultsTool))
    elif spec.delegates_to is not None:
        tools = limit_delegation(tools, spec.delegates_to)
    prompt = f"{spec.system_prompt}\n\n{FRAMING}" if spec.system_prompt else FRAMING
    limits: dict[str, Any] = {}
    if spec.max_turns is not None:
        limits["max_turns"] = spec.max_turns
    return Agent(
        model=model,
        tools=tools,
        system_prompt=prompt,
        agent_id=spec.agent_id,
        gate=spec.gate,
        audit=spec.audit,
        max_messages=spec.max_messages,
        checkpoint=checkpoint,
        **limits,
        **agent_settings(spec),
    )


# (_report_start, like _ending's offer_entry and _report_end, reads the task's
# private fields, not its read-only views: it runs for every task.)


async def _report_start(task: Task, kind: EventKind) -> AuditError | None:
    # A queued or started step: audited in the task's sink first, then sent as an
    # event, which never waits (see Stream). If the sink fails, the AuditError is
    # returned and nothing is announced: a start that cannot be audited does not run.
    # The entry is recorded without awaiting when the sink can take it so
    # (record_fields_sync, and the task is not cancelled); else awaited.
    sink = task._spec.audit
    if sink is not None:
        try:
            entry = offer_entry(task, sink, kind, None, None, True)
        except AuditError as exc:
            return exc
        if entry is not None:
            failure = await _audit(sink, entry)
            if failure is not None:
                return failure
    observe = task._pool._observer
    if task._events is not None or observe is not None:
        tagged = tagged_of(task._path, kind, None, task._call_id)
        if observe is not None:
            observe(tagged)
        if task._events is not None:
            task._events._send_reserved(tagged)
    return None


async def _audit(sink: Sink, entry: Record) -> AuditError | None:
    # Record one lifecycle entry; a sink that fails is returned as an AuditError.
    try:
        await record(sink, entry)
    except AuditError as failure:
        return failure
    return None


def _prepare(task: Task, agent: Agent | None = None) -> agentcore.Run:
    # The task's run (on ``agent``, built already, or built here), and its limits
    # (the deadline of task._scope; none without limits).
    spec = task._spec
    if agent is None:
        agent = build_agent(task)
    sink = emitter(task)
    if task._resume is not None:
        # Pool.resume checked the state against the spec.
        run = agent.new_run_from(task._resume, emit=sink)
    else:
        path = task._path
        run = agent.new_run(
            task._input, path=path, emit=sink, run_id="/".join(path), history=task._history,
        )
    task._attach(run)
    # One scope for both limits: its deadline is the earlier of the wall deadline and
    # the idle one (Task._progress pushes the latter back); which fired is told by
    # the wall deadline. A run with neither limit runs without one. Setting them is
    # the run's first push of its idle watchdog (Emitter.limited).
    if spec.timeout is not None or spec.idle_timeout is not None:
        now = trio.current_time()
        wall = now + spec.timeout if spec.timeout is not None else math.inf
        task._limit(
            wall if spec.idle_timeout is None else min(wall, now + spec.idle_timeout), wall
        )
        if sink is not None:
            sink.limited(now)
    return run


def _timed_out(task: Task, run: agentcore.Run) -> TaskStatus:
    # The run ended by its limits (the task's scope's deadline, not a cancel): which
    # limit fired is told by the wall deadline.
    spec = task.spec
    assert run.summary is not None
    if trio.current_time() >= task._wall_deadline:
        text = f"timed out after {spec.timeout:g}s"
    else:
        text = f"was idle for {spec.idle_timeout:g}s: no event within its idle_timeout"
    task._conclude(
        "", attrs.evolve(run.summary, end_reason=EndReason.timeout, error=text), None, text
    )
    return TaskStatus.timed_out


async def run_task(task: Task) -> None:
    """Take ``task`` from queued to resolved; the pool starts it in its nursery (the
    core's StartRunner). A checkpoint.

    It commits its ``start`` checkpoint (with checkpoints, a new run: see
    ``commit_start``), reports ``task_queued``, waits for a slot, reports
    ``task_started`` and runs;
    then it tells the core how the run ended (``cancelled``: cancelled before or
    while it ran), ends the task and resolves it (``_ending``). One coroutine
    for all of it: a frame fewer per parked run.
    """
    status = _CANCELLED
    failure: AuditError | CheckpointError | None = None
    agent: Agent | None = None
    started: agentcore.Checkpoint | None = None
    # The run, once prepared (its limits set, current_task set to the task).
    run: agentcore.Run | None = None
    outer: Task | None = None
    try:
        # The task's scope, entered and exited as a with-block would, by hand: a
        # with-block holds its manager's bound __exit__ (64 B of every parked task);
        # exited by _scopes.exit_scope (__exit__'s steps, without its context manager).
        task._scope.__enter__()
        try:
            if task._scope.cancel_called:
                # A task cancelled before its runner ran still reports that it was queued.
                with trio.move_on_after(END_TIMEOUT, shield=True):
                    failure = await _report_start(task, EventKind.task_queued)
            else:
                if task.pool.checkpoints is not None and task._resume is None:
                    # Durable before it is announced: recover() restarts it from its input.
                    agent = build_agent(task)
                    started, failure = await _commit_start(task, agent)
                    start_done(task)
                failure = await _report_start(task, EventKind.task_queued) or failure
            await task._wait_granted()
            if failure is None:
                failure = await _report_start(task, EventKind.task_started)
            if failure is None:
                # Its limits are the task's own scope's deadline (see Task._limit).
                taken = take_background(task)
                run = _prepare(task, agent)
                # The outer value is restored (a Token would be 64 B of every parked run).
                outer = current_task.get()
                current_task.set(task)
                if taken or pause_asked(task):
                    await start_background(task, run, taken, start_child)
                # One cancel scope for the task and its run: the run aborts by
                # cancelling the task's (see agentcore's ScopeOwner).
                status = _ran(task, await run.run(owner=task))
            else:
                status = _failed(task, failure)
        except CheckpointError as failure:  # (a local above: no slot more in every parked run)
            # The run's end (a pause) could not be stored: the run has ended, and the
            # task fails with the error rather than taking the pool down; its row keeps
            # the run's last checkpoint, from which recover() runs it again (to the same
            # pause: no call past it had run).
            exit_scope(task._scope, failure)
            status = _failed(task, failure)
        except BaseException:
            if not exit_scope(task._scope, sys.exception()):
                raise
        else:
            exit_scope(task._scope, None)
        if (
            task._scope.cancelled_caught
            and task._node.cancel_cause is None
            and task._scope.cancel_called
            and task._run is not None
        ):
            # Not cancelled: the scope caught its deadline, one of the run's limits (a
            # scope that caught a cancel from outside it, left by a misnesting, did not).
            status = _timed_out(task, task._run)
    finally:
        # (The run's limits and current_task are undone here, not in a try of their
        # own: an exception unwinding a cancelled run then passes one handler less.)
        if run is not None:
            task._unlimit()
            current_task.set(outer)
        start_done(task)
        if task._run is None and (started is not None or task._resume is not None):
            await end_unstarted(task, started, END_TIMEOUT)
        if not resolve_at_once(task, status):
            await resolve(task, status)


# The steps of run_task apart from it: its frame is part of every parked run, so
# it keeps few locals (and a shallow stack).

async def _commit_start(
    task: Task, agent: Agent
) -> tuple[agentcore.Checkpoint | None, CheckpointError | None]:
    # The task's start checkpoint, or the error that refused it.
    try:
        return await commit_start(task, agent), None
    except CheckpointError as exc:
        return None, exc


def _ran(task: Task, result: agentcore.RunResult) -> TaskStatus:
    task._conclude_run(result)
    if task._budget is not None and task._run is not None:
        # A paused state keeps its spend: the budgets go on from it on resume.
        task._run.state.spent = task._budget.spent()
    return settle_budget(task, end_status(result.summary.end_reason))


def _failed(task: Task, failure: AuditError | CheckpointError) -> TaskStatus:
    # Fail closed: a task whose queueing or start cannot be audited (or
    # checkpointed) does not run.
    task._conclude("", None, failure, f"{type(failure).__name__}: {failure}")
    return TaskStatus.failed


