"""The tool phase of a turn: gate and execute calls, read-only ones concurrently."""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import attrs
import trio

from .._audit import batch_failure
from .._errors import CallPaused, describe
from .._events import EventKind
from .._messages import Message, ToolCall
from .._steering import SKIPPED_INTERRUPTED, SKIPPED_STEERED
from .._tools._arguments import ArgumentsError, load_arguments
from .._tools._gate import ALLOW, AllOf, GateDecision, GateRequest, ask
from .._tools._tools import SelfMonitoring, Tool, ToolOutcome
from ._checkpoint import before_call
from ._hookcall import intercept
from ._idempotency import CurrentToolCall, ensure_nonce
from ._pause import Deferred, pending_of
from ._pending import schema_digest
from ._port import _current_run
from ._state import RunState

if TYPE_CHECKING:
    from ._port import RunPort


async def run_tools(run: RunPort, calls: Sequence[ToolCall]) -> None:
    """Execute one turn's tool calls and append their results in call order. A checkpoint.

    Consecutive calls of known read-only tools form a batch run concurrently (at
    most ``max_parallel_tools`` at once); any other call runs alone. Before each
    call or batch, a pending interrupt or steering message skips the rest of the
    turn's calls: each gets a ``skipped: ...`` error result and a ``tool_skipped``
    event. A call its gate defers pauses the run: the calls started finish, no
    other starts, and the turn's calls without a result go to ``run.pause_calls``.
    """
    read_only = run.agent.read_only_names
    i, n = 0, len(calls)
    while i < n:
        if run.pausing:
            # Asked to pause (Run.pause) before this call started: nothing new starts.
            run.pause_calls(*pending_of(calls[i:], []))
            return
        if run.interrupt_requested or run.has_pending:
            text = SKIPPED_INTERRUPTED if run.interrupt_requested else SKIPPED_STEERED
            await skip_calls(run, calls[i:], text)
            return
        j = i + 1
        if calls[i].name in read_only:
            while j < n and calls[j].name in read_only:
                j += 1
        if j == i + 1:
            outcome = await call_tool(run, calls[i])
            if run.pausing:
                # A gate deferred the call: keep it and the rest.
                run.pause_calls(*pending_of(calls[i:], [outcome]))
                return
            run.add_message(result_message(calls[i], outcome))
            i += 1
            continue
        outcomes = await _batch(run, calls[i:j])
        if run.pausing:
            # A gate deferred a call: the started calls have finished; keep the rest.
            run.pause_calls(*pending_of(calls[i:], outcomes))
            return
        run.add_messages(result_message(c, o) for c, o in zip(calls[i:j], outcomes, strict=False))
        i += len(outcomes)


async def skip_calls(run: RunPort, calls: Sequence[ToolCall], text: str) -> None:
    """Answer ``calls`` with ``text`` as error results without running them, then emit
    their ``tool_skipped`` events (after ``interrupt_received`` if an interrupt is
    why). A checkpoint when there is a destination."""
    run.count_calls(len(calls))
    run.add_messages(
        Message("tool", text, tool_call_id=call.id, is_error=True) for call in calls
    )
    if run.interrupt_requested:
        await run.note_interrupt()
    for call in calls:
        await run.emit(EventKind.tool_skipped, call=call, text=text)


def result_message(call: ToolCall, outcome: ToolOutcome) -> Message:
    """The tool message answering ``call`` with ``outcome``."""
    return Message("tool", outcome.text, tool_call_id=call.id, is_error=outcome.is_error)


async def _batch(run: RunPort, calls: Sequence[ToolCall]) -> list[ToolOutcome]:
    # Returns the outcomes of the calls started: a prefix of ``calls``, shorter when
    # an interrupt or steering arrived while waiting to start one.
    outcomes: list[ToolOutcome | None] = [None] * len(calls)
    limit = run.agent.max_parallel_tools
    slots = trio.Semaphore(limit) if len(calls) > limit else None

    async def one(k: int, *, task_status: trio.TaskStatus[bool | Exception]) -> None:
        try:
            # Checked in the child too: the parent's start() lets other tasks run first.
            if run.interrupt_requested or run.has_pending or run.pausing:
                task_status.started(False)
                return
            try:
                await announce_call(run, calls[k])
            except Exception as exc:
                # Handed to the parent, which raises it: trio before 0.34 dropped the
                # __cause__ of an exception raised before task_status.started()
                # (python-trio/trio#3394), and an audit failure must name its cause.
                task_status.started(exc)
                return
            # The call goes on in this same step (its before_tool hooks included), so
            # a hook's abort is seen before the next call of the batch is started.
            task_status.started(True)
            outcomes[k] = await call_tool(run, calls[k], announced=True)
        finally:
            if slots is not None:
                slots.release()

    started = 0
    try:
        async with trio.open_nursery() as nursery:
            for k in range(len(calls)):
                if slots is not None:
                    await slots.acquire()
                # start() returns after the call's tool_start, so those come in call order.
                status = await nursery.start(one, k)
                if isinstance(status, Exception):
                    raise status
                if not status:
                    break
                started += 1
    except BaseExceptionGroup as group:
        failure = batch_failure(group)
        if failure is None:
            raise
        raise failure from group
    return [o for o in outcomes[:started] if o is not None]


async def announce_call(run: RunPort, call: ToolCall) -> None:
    """Count ``call`` and report its ``tool_start`` (audited as ``tool_request``), the
    first step of :func:`call_tool`. A checkpoint.

    Raises:
      AuditError: The audit sink could not record the entry.
    """
    run.count_calls(1)
    await run.report(EventKind.tool_start, "tool_request", call=call, tool=call.name,
                     call_id=call.id, arguments=call.arguments)


async def call_tool(run: RunPort, call: ToolCall, *, announced: bool = False) -> ToolOutcome:
    """Gate and execute one tool call, with its hooks, events and audit. A checkpoint.

    Every failure (unknown tool, arguments that are not a JSON object or are past
    a bound of :func:`load_arguments`, a denial, a ``before_tool`` hook that fails,
    a tool that raises or times out) becomes an error outcome. ``announced`` says
    :func:`announce_call` already ran for ``call`` (a batch announces its calls in
    order before their tasks start).
    """
    if not announced:
        await announce_call(run, call)
    started = trio.current_time()
    hooks = run.agent.hookset
    effective = call
    denial = None
    if hooks.before_tool:
        effective, denial = await intercept(
            run, hooks.before_tool, (run,), call, ToolCall, may_deny=True
        )
        if effective.id != call.id:
            effective = attrs.evolve(effective, id=call.id)
    if denial is not None:
        if denial.failed:
            # A policy hook that failed denies like a gate would: audited as one.
            await _record_decision(run, effective, GateDecision(False, denial.reason))
        outcome = ToolOutcome(f"denied: {denial.reason}", True, True)
    else:
        outcome = await _gated_execute(run, effective)
        if isinstance(outcome, Deferred):
            return outcome
    return await _end_call(run, call, effective, outcome, started)


async def answer_call(run: RunPort, call: ToolCall, decision: GateDecision) -> ToolOutcome:
    """Finish a deferred call with a human's ``decision`` (on resume). A checkpoint.

    The call's ``tool_start`` and ``before_tool`` hooks ran before the pause; this
    records the decision, runs the tool if allowed, and ends the call as
    :func:`call_tool` does.
    """
    started = trio.current_time()
    await _record_decision(run, call, decision)
    tool = run.agent.tools_by_name.get(call.name)
    if not decision.allowed or tool is None:
        outcome = ToolOutcome(f"denied: {decision.reason}", True, True)
    else:
        outcome = await _execute(run, tool, call)
        if isinstance(outcome, Deferred):
            return outcome
    return await _end_call(run, call, call, outcome, started)


# The call a resumed run calls again and the state it left paused. Tied to that call
# (the object its execution makes current): a task started inside it (a subagent's
# run) inherits the variable, and must not read the state as its own calls'.
_resumed_state: contextvars.ContextVar[tuple[ToolCall, RunState] | None] = (
    contextvars.ContextVar("agentcore_resumed_call_state", default=None))


def resumed_call_state() -> RunState | None:
    """While a resumed run calls a tool again for a call that raised ``CallPaused``
    (on the same arguments), the state that call left paused; else ``None`` (also in
    the calls of runs started from inside that call: a subagent's). Not a checkpoint.
    The delegation tool continues that run instead of starting anew."""
    resumed = _resumed_state.get()
    current = _current_call.get()
    if resumed is None or current is None or resumed[0] is not current.call:
        return None
    return resumed[1]


async def continue_call(run: RunPort, call: ToolCall, child: RunState) -> ToolOutcome:
    """Finish a delegated call on resume: its tool runs again with ``child`` as
    :func:`resumed_call_state`, then the call ends as :func:`call_tool` ends it (or
    it is deferred again). A checkpoint."""
    started = trio.current_time()
    tool = run.agent.tools_by_name.get(call.name)
    if tool is None:
        outcome = ToolOutcome(f"unknown tool {call.name!r}: cannot continue the call", True)
    else:
        token = _resumed_state.set((call, child))
        try:
            outcome = await _execute(run, tool, call)
        finally:
            _resumed_state.reset(token)
        if isinstance(outcome, Deferred):
            return outcome
    return await _end_call(run, call, call, outcome, started)


async def _end_call(
    run: RunPort, call: ToolCall, effective: ToolCall, outcome: ToolOutcome, started: float
) -> ToolOutcome:
    # The after_tool hooks, the counts, tool_end and the tool_result entry.
    hooks = run.agent.hookset
    if hooks.after_tool:
        outcome, _ = await intercept(run, hooks.after_tool, (run, effective), outcome, ToolOutcome)
    run.count_outcome(outcome)
    await run.report(
        EventKind.tool_end, "tool_result", call=effective, text=outcome.text,
        is_error=outcome.is_error, tool=effective.name, call_id=call.id,
        result=None if outcome.is_error else outcome.text,
        error=outcome.text if outcome.is_error else None,
        duration=trio.current_time() - started,
    )
    return outcome


async def _gated_execute(run: RunPort, call: ToolCall) -> ToolOutcome:
    agent = run.agent
    tool = agent.tools_by_name.get(call.name)
    if tool is None:
        names = ", ".join(sorted(agent.tools_by_name)) or "none"
        return ToolOutcome(f"unknown tool {call.name!r}; available tools: {names}", True)
    problem = _argument_problem(call)
    if problem is not None:
        return ToolOutcome(problem, True)
    # (No gate: allowed, without _decide's coroutine.)
    decision = ALLOW if agent.gate is None else await _decide(run, tool, call)
    await _record_decision(run, call, decision)
    if decision.deferred:
        run.note_deferral()
        return Deferred(decision.reason, call=call,
                        schema=schema_digest(tool.name, tool.parameters))
    if not decision.allowed:
        return ToolOutcome(f"denied: {decision.reason}", True, True)
    return await _execute(run, tool, call)


async def _record_decision(run: RunPort, call: ToolCall, decision: GateDecision) -> None:
    # The gate_decision event, then its audit entry (raises AuditError: the call
    # must not go on).
    await run.report(
        EventKind.gate_decision, "gate_decision", call=call, decision=decision,
        tool=call.name, call_id=call.id,
        verdict="defer" if decision.deferred else "allow" if decision.allowed else "deny",
        reason=decision.reason,
    )


async def _decide(run: RunPort, tool: Tool, call: ToolCall) -> GateDecision:
    gate = run.agent.gate
    if gate is None:
        return ALLOW
    timeout = run.agent.gate_timeout
    request = GateRequest(run.path, tool, call)
    if isinstance(gate, AllOf):
        # Its members share the timeout, and a denial for want of time names the
        # member that was deciding.
        return await gate.decide(request, trio.current_time() + timeout)
    with trio.move_on_after(timeout):
        return await ask(gate, request)
    return GateDecision(False, f"the gate did not decide within {timeout:g}s")


class _Current:
    # The call whose tool runs (the object the run holds), its run, the run's nonce
    # and id, and the CurrentToolCall made of them the first time current_tool_call()
    # is read.
    __slots__ = ("call", "made", "nonce", "run", "run_id")

    def __init__(self, call: ToolCall, run: object, nonce: str, run_id: str) -> None:
        self.call = call
        self.run = run
        self.nonce = nonce
        self.run_id = run_id
        self.made: CurrentToolCall | None = None


_current_call: contextvars.ContextVar[_Current | None] = contextvars.ContextVar(
    "agentcore_current_tool_call", default=None)


def current_tool_call() -> CurrentToolCall | None:
    """The tool call whose tool is executing in this task's run, else ``None``. Not a
    checkpoint.

    Set around a tool's ``execute`` (in the task that runs it, so each of a turn's
    parallel calls sees its own): a tool that starts other work (the delegation tool)
    reads the id of the call it runs in here, not from events. A run started from
    inside a tool call (a subagent, in the pool's task or inline) is not in that call:
    there it is ``None`` until the run's own tool runs, and the caller's again once
    the run has ended (the call is its run's: ``agentcore.current_run()``). Its
    ``idempotency_key`` is stable for that call across retries, pause and resume and
    crash recovery, and differs between calls and runs (see ``_idempotency``): a
    tool that calls an outside API taking an idempotency key passes it there.
    """
    current = _current_call.get()
    if current is None or current.run is not _current_run.get():
        return None
    made = current.made
    if made is None:
        call = current.call
        made = current.made = CurrentToolCall(call.id, call.name, call.arguments,
                                              nonce=current.nonce, run_id=current.run_id)
    return made


async def _execute(run: RunPort, tool: Tool, call: ToolCall) -> ToolOutcome:
    # The run's nonce before its checkpoint: a call recovered from it has the same key.
    nonce = ensure_nonce(run.state)
    checkpoint = run.agent.checkpoint
    if checkpoint is not None and call.name not in run.agent.read_only_names:
        # Durable before the tool starts: a crash from here on finds it in flight.
        await before_call(run.state, checkpoint, call)
    if run.abort_requested:
        # This task may have been runnable already when the run was aborted.
        await trio.lowlevel.checkpoint()
    timeout = run.agent.tool_timeout
    # The tool runs in this frame (no coroutine of its own), the call current around it.
    token = _current_call.set(_Current(call, run, nonce, run.state.run_id))
    try:
        if call.name in run.agent.self_monitoring_names:
            # Checked at Agent construction: the tool implements SelfMonitoring.
            monitored = cast(SelfMonitoring, tool)
            result = await monitored.execute_monitored(call.arguments, timeout)
            return ToolOutcome(result) if type(result) is str else _not_text(call, result)
        # move_on_after(timeout), without its argument checks (Agent checked the
        # timeout) and relative deadline: a scope per call is most of a call's cost.
        with trio.CancelScope(deadline=trio.current_time() + timeout):
            result = await tool.execute(call.arguments)
            return ToolOutcome(result) if type(result) is str else _not_text(call, result)
    except CallPaused as paused:
        if isinstance(paused.state, RunState):
            run.note_deferral()
            return Deferred(str(paused), call=call, child=paused.state)
        return ToolOutcome(f"tool {call.name!r} failed: {describe(paused)}", True)
    except Exception as exc:
        return ToolOutcome(f"tool {call.name!r} failed: {describe(exc)}", True)
    finally:
        _current_call.reset(token)
    return ToolOutcome(f"tool {call.name!r} timed out after {timeout:g}s", True)


def _not_text(call: ToolCall, result: object) -> ToolOutcome:
    # The outcome of a tool that returned something other than an exact str: a str
    # subclass is the str it holds (its own methods never run again), anything else
    # is the tool's failure, said as one (not left to fail the audit entry, the
    # events or the model's message that would carry it).
    if isinstance(result, str):
        return ToolOutcome(str.__str__(result))
    return ToolOutcome(
        f"tool {call.name!r} failed: it returned {type(result).__name__}, not str", True
    )


def _argument_problem(call: ToolCall) -> str | None:
    try:
        value = load_arguments(call.arguments)
    except ArgumentsError as exc:
        return f"tool {call.name!r}: {exc}"
    except (ValueError, TypeError) as exc:
        return f"invalid JSON arguments for tool {call.name!r}: {exc}"
    if not isinstance(value, dict):
        return (
            f"arguments for tool {call.name!r} must be a JSON object, "
            f"not {type(value).__name__}"
        )
    return None
