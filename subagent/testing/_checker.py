"""The invariant checker of a pool's event log (:func:`subagent.testing.check_events`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

import attrs

import agentcore

from .._errors import format_path
from .._events import Event, EventKind

_TERMINAL = frozenset({EventKind.task_finished, EventKind.task_cancelled})


class EventLogError(AssertionError):
    """An event log breaks one of the invariants :func:`check_events` checks."""


@attrs.frozen
class EventLogReport:
    """What :func:`check_events` found in a log that passed."""

    events: int
    """Events checked."""
    paths: int
    """Distinct AgentPaths in the log (tasks seen)."""
    runs: int
    """Runs that delivered ``agent_start`` (each delivered exactly one ``agent_end``)."""
    peak_concurrency: int
    """The most runs holding a concurrency slot at once, as reconstructed from the log."""


@attrs.define
class _PathState:
    queued: bool = False
    started: bool = False
    ended: bool = False
    agent_start: bool = False
    agent_end: bool = False
    turn: int = 0
    open_calls: dict[str, str] = attrs.field(factory=dict)
    occupying: bool = False
    # Calls of a slot-lending tool in progress, and whether the run lent its slot
    # and has not been seen using it again since the last of them ended.
    lending: int = 0
    lent: bool = False
    # Whether its result (a background task's) was delivered or reported orphaned.
    settled: bool = False


# The events of a run that only a run going on makes: it has its slot back by then.
_GOING_ON = frozenset({
    agentcore.EventKind.turn_start,
    agentcore.EventKind.model_request,
    agentcore.EventKind.model_delta,
    agentcore.EventKind.model_response,
})


def check_events(
    events: Iterable[Event],
    *,
    max_concurrent: int | None = None,
    complete: bool = True,
    delegation_tool: str = "subagent",
    results_tool: str = "subagent_results",
) -> EventLogReport:
    """Check the invariants of a pool's event log; not a checkpoint.

    Per AgentPath, in log order: ``task_queued`` (at most once) comes first,
    ``task_started`` (at most once) after it and before the run's events, a
    terminal ``task_finished`` or ``task_cancelled`` exactly once and last; the
    run's events start with ``agent_start``, end with exactly one ``agent_end``,
    have non-decreasing turns, and each ``gate_decision`` and ``tool_end`` follows
    its call's ``tool_start``. No event object appears twice. A background task's
    result is settled at most once: a ``result_delivered`` (inside its parent's
    run, after the task's terminal event) or a ``task_orphaned`` (after it).
    ``event_loop_blocked`` events may come anywhere.

    With ``max_concurrent``, the runs holding a slot are reconstructed from the
    log and must never exceed it. A run holds one from ``task_started`` to its
    ``agent_end`` (or to the terminal event when the run never started), except
    while it lends it: from the ``tool_start`` of a call of a slot-lending tool
    (the delegation tool and the results tool) until the run is seen going on
    after the last such call ended (its next ``turn_start`` or model event; a run
    ended from outside during the call does not take its slot back). This needs
    every event of the pool in one log, in the order one stream delivered them
    (overflow ``"block"``).

    Args:
      events: The log, in delivery order.
      max_concurrent: The pool's bound, to check it; ``None`` skips the check.
      complete: Whether the log was taken after the pool closed: then every task
        has its terminal event and every ``agent_start`` its ``agent_end``.
      delegation_tool: The name of the delegation tool.
      results_tool: The name of the tool that waits for background results.

    Returns:
      An :class:`EventLogReport`.

    Raises:
      EventLogError: an invariant is broken; the message names the path and event.
    """
    states: dict[tuple[str, ...], _PathState] = defaultdict(_PathState)
    lending_tools = frozenset({delegation_tool, results_tool})
    seen: set[int] = set()
    occupying = peak = count = 0

    for index, event in enumerate(events):
        count += 1
        where = f"event {index} ({event.kind}) of {format_path(event.path)}"

        def fail(text: str, where: str = where) -> EventLogError:
            return EventLogError(f"{where}: {text}")

        if id(event) in seen:
            raise fail("the same event object was delivered twice")
        seen.add(id(event))
        state = states[event.path]
        kind = event.kind
        if kind is EventKind.event_loop_blocked:
            # Sent when the loop runs again, in no order with the run it names.
            continue
        if kind is EventKind.task_orphaned:
            _settle(state, fail)
            continue
        if kind is EventKind.result_delivered:
            if not state.agent_start or state.agent_end:
                raise fail("a result delivered outside its parent's run")
            if event.child is None:
                raise fail("result_delivered without its child's path")
            _settle(states[event.child], fail)
            continue
        if state.ended:
            raise fail("an event after the task's terminal event")
        if kind is EventKind.task_queued:
            if state.queued or state.started or state.agent_start:
                raise fail("task_queued is not the task's first event")
            state.queued = True
        elif kind is EventKind.task_started:
            if state.started or state.agent_start:
                raise fail("task_started twice, or after the run's events")
            state.started = state.occupying = True
            occupying += 1
        elif kind in _TERMINAL:
            if state.agent_start and not state.agent_end:
                raise fail("the task ended with its run's agent_end missing")
            state.ended = True
            if state.occupying:
                state.occupying = False
                occupying -= 1
        elif isinstance(kind, agentcore.EventKind):
            inner = event.event
            if inner is None:
                raise fail("a run's event without its agentcore event")
            if kind is agentcore.EventKind.agent_start:
                if state.agent_start:
                    raise fail("a second agent_start")
                state.agent_start = True
            elif not state.agent_start:
                raise fail("a run's event before its agent_start")
            elif state.agent_end:
                raise fail("a run's event after its agent_end")
            if inner.turn < state.turn:
                raise fail(f"turn {inner.turn} after turn {state.turn}")
            state.turn = inner.turn
            call = inner.call
            if kind is agentcore.EventKind.tool_start and call is not None:
                state.open_calls[call.id] = call.name
                if call.name in lending_tools:
                    state.lending += 1
                    state.lent = True
                    if state.occupying:
                        state.occupying = False
                        occupying -= 1
            elif kind in (agentcore.EventKind.gate_decision, agentcore.EventKind.tool_end):
                if call is None or call.id not in state.open_calls:
                    raise fail(f"{kind} without its call's tool_start")
                if kind is agentcore.EventKind.tool_end:
                    name = state.open_calls.pop(call.id)
                    if name in lending_tools:
                        state.lending -= 1
            elif kind is agentcore.EventKind.agent_end:
                state.agent_end = True
                state.lent = False
                if state.occupying:
                    state.occupying = False
                    occupying -= 1
            elif kind in _GOING_ON and state.lent and not state.lending and state.started:
                state.lent = False
                state.occupying = True
                occupying += 1
        if max_concurrent is not None and occupying > max_concurrent:
            raise fail(
                f"{occupying} runs hold a concurrency slot at once, "
                f"and max_concurrent is {max_concurrent}"
            )
        peak = max(peak, occupying)

    if complete:
        for path, state in states.items():
            if state.agent_start and not state.agent_end:
                raise EventLogError(f"{format_path(path)}: agent_start without agent_end")
            if (state.queued or state.started) and not state.ended:
                raise EventLogError(f"{format_path(path)}: no task_finished or task_cancelled")
    runs = sum(1 for state in states.values() if state.agent_start)
    return EventLogReport(count, len(states), runs, peak)


def _settle(state: _PathState, fail: Callable[[str], EventLogError]) -> None:
    # A background task's result was delivered or reported orphaned.
    if not state.ended:
        raise fail("a background result before the task's terminal event")
    if state.settled:
        raise fail("a background result delivered or orphaned twice")
    state.settled = True
