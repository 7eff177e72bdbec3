"""A testing kit for programs built on subagent: deterministic models, hypothesis
strategies for specs and workloads, and an invariant checker over an event log.

The models and tools are agentcore's (:class:`ScriptedModel`, :class:`RecordingTool`,
...), re-exported here. The strategies need hypothesis installed (a dev dependency:
this module imports it only when a strategy is built). :func:`check_events` needs
nothing but the events.

Property-testing your own agent code: draw a workload, run it through a pool on
trio's mock clock with every event going to one stream, then check the log::

    import contextlib
    import trio, trio.testing
    from hypothesis import given, strategies as st
    from subagent import Spec, Stream, SubagentTool, SubagentError, open_pool
    from subagent.testing import check_events, workloads

    @given(workloads(), st.integers(1, 4))
    def test_my_pool(workload, max_concurrent):
        async def main():
            events = Stream(100_000)
            async with open_pool(max_concurrent=max_concurrent, events=events) as pool:
                pool.register(Spec("worker", model=workload.model(),
                                   tools=[SubagentTool(pool)]))
                tasks = [await pool.submit("worker", workload.input(job))
                         for job in workload.roots]
                for task in tasks:
                    with contextlib.suppress(SubagentError):
                        await task.wait()
            events.close()
            log = [event async for event in events]
            check_events(log, max_concurrent=max_concurrent)

        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

Replace the workload's model by your own agent's pieces (a tool, a gate, a hook)
and keep :func:`check_events`: it fails the test with a message naming the run
and the event that broke an invariant.

``workloads(background=True, critical=True)`` also draws background children and
critical ones: then give the spec a :class:`subagent.SubagentResultsTool` too, and
register the same spec again as ``"critical-worker"`` with ``critical=True``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import attrs
import trio

import agentcore
from agentcore import Message, ModelError, ModelRequest, ModelResponse, ToolCall
from agentcore.testing import Blocked as Blocked
from agentcore.testing import Delayed as Delayed
from agentcore.testing import RecordingTool as RecordingTool
from agentcore.testing import ScriptedModel as ScriptedModel
from agentcore.testing import ScriptExhaustedError as ScriptExhaustedError
from agentcore.testing import StreamingScriptedModel as StreamingScriptedModel
from agentcore.testing import tool_call_reply as tool_call_reply

from ._errors import format_path
from ._events import Event, EventKind
from ._spec import Spec

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn, SearchStrategy

__all__ = [
    "Blocked",
    "Delayed",
    "EventLogError",
    "EventLogReport",
    "Job",
    "RecordingTool",
    "ScriptExhaustedError",
    "ScriptedModel",
    "StreamingScriptedModel",
    "Workload",
    "WorkloadModel",
    "check_events",
    "delegate_reply",
    "specs",
    "tool_call_reply",
    "workloads",
]


def delegate_reply(agent: str, task: str, *, id: str | None = None) -> Message:
    """A scripted assistant message that calls the delegation tool (``subagent``)
    with ``agent`` and ``task``."""
    return tool_call_reply("subagent", json.dumps({"agent": agent, "task": task}), id=id)


# -- the invariant checker ------------------------------------------------------------

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


# -- workloads ------------------------------------------------------------------------


@attrs.frozen
class Job:
    """One run of a :class:`Workload`.

    Its model calls each take ``delay`` virtual seconds. It delegates to its
    ``children`` in order through the delegation tool (one model call each: a
    ``background`` child with ``"wait": false``), waits for its background children
    with the results tool if it started any (one more model call), then answers
    ``done <id>``, or fails with a :class:`agentcore.ModelError` if ``fail``.

    Attributes:
      id: Its number in the workload (its input is ``job <id>``).
      delay: Seconds (trio's clock) each of its model calls takes.
      fail: Whether its last model call raises instead of answering.
      children: The jobs it delegates to, in order.
      background: Whether its parent starts it in the background.
      critical: Whether its parent delegates it to the workload's ``critical_agent``
        (register that spec with ``critical=True``) instead of its ``agent``.
    """

    id: int
    delay: float
    fail: bool = False
    children: tuple[Job, ...] = ()
    background: bool = False
    critical: bool = False


@attrs.frozen
class Workload:
    """Root jobs to submit, each a tree of delegations.

    Attributes:
      roots: The jobs submitted from outside the pool.
      agent: The spec name the delegations name.
      critical_agent: The spec name the delegations of critical jobs name.
    """

    roots: tuple[Job, ...]
    agent: str = "worker"
    critical_agent: str = "critical-worker"

    @property
    def jobs(self) -> dict[int, Job]:
        """Every job of the workload by id."""
        found: dict[int, Job] = {}
        stack = list(self.roots)
        while stack:
            job = stack.pop()
            found[job.id] = job
            stack.extend(job.children)
        return found

    @staticmethod
    def input(job: Job) -> str:
        """The task text that runs ``job``."""
        return f"job {job.id}"

    def model(self) -> WorkloadModel:
        """A fresh model that plays this workload."""
        return WorkloadModel(self)


class WorkloadModel:
    """A ChatModel that plays a :class:`Workload`: it finds the job from the run's task
    text (the first ``job <id>`` user message) and the step from the tool results so far.

    Attributes:
      calls: Model calls made.
      active: Model calls in progress now; ``max_active``: the most ever at once.
    """

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self._jobs: Mapping[int, Job] = workload.jobs
        self.calls = 0
        self.active = 0
        self.max_active = 0

    def __repr__(self) -> str:
        return f"<WorkloadModel jobs={len(self._jobs)} calls={self.calls}>"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Play the next step of the request's job. A checkpoint."""
        task = next(m.content for m in request.messages if m.role == "user")
        job = self._jobs[int(task.removeprefix("job "))]
        self.calls += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await trio.sleep(job.delay)
        finally:
            self.active -= 1
        done = sum(1 for m in request.messages if m.role == "tool")
        call: ToolCall | None = None
        if done < len(job.children):
            child = job.children[done]
            workload = self.workload
            arguments: dict[str, object] = {
                "agent": workload.critical_agent if child.critical else workload.agent,
                "task": f"job {child.id}",
            }
            if child.background:
                arguments["wait"] = False
            call = ToolCall(f"job{job.id}-{done}", "subagent", json.dumps(arguments))
        elif done == len(job.children) and any(child.background for child in job.children):
            call = ToolCall(f"job{job.id}-{done}", "subagent_results", "{}")
        if call is not None:
            return ModelResponse(Message("assistant", tool_calls=(call,)), "tool_calls")
        if job.fail:
            raise ModelError(f"job {job.id} failed")
        return ModelResponse(Message("assistant", f"done {job.id}"))


def workloads(
    *,
    max_roots: int = 6,
    max_depth: int = 3,
    max_children: int = 2,
    max_jobs: int = 16,
    delays: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0),
    agent: str = "worker",
    background: bool = False,
    critical: bool = False,
) -> SearchStrategy[Workload]:
    """A hypothesis strategy for :class:`Workload`: up to ``max_roots`` root jobs,
    each delegating up to ``max_children`` deep to ``max_depth`` (the root is depth 1),
    at most ``max_jobs`` jobs in all; some fail. With ``background``, some children
    are started in the background (their parents then need the results tool); with
    ``critical``, some are critical. Shrinks toward fewer, shallower, faster jobs.
    Needs hypothesis.
    """
    from hypothesis import strategies as st

    @st.composite
    def draw(draw: DrawFn) -> Workload:
        ids = iter(range(1, max_jobs + 1))
        budget = [max_jobs]

        def job(depth: int) -> Job:
            budget[0] -= 1
            job_id = next(ids)
            delay = draw(st.sampled_from(delays))
            fail = draw(st.integers(0, 4)) == 0
            in_background = depth > 1 and background and draw(st.booleans())
            is_critical = depth > 1 and critical and draw(st.integers(0, 2)) == 0
            children: list[Job] = []
            if depth < max_depth:
                for _ in range(draw(st.integers(0, max_children))):
                    if budget[0] == 0:
                        break
                    children.append(job(depth + 1))
            return Job(job_id, delay, fail, tuple(children), in_background, is_critical)

        roots: list[Job] = []
        for _ in range(draw(st.integers(0, max_roots))):
            if budget[0] == 0:
                break
            roots.append(job(1))
        return Workload(tuple(roots), agent)

    return draw()


def specs(
    *,
    model: agentcore.ChatModel | None = None,
    names: SearchStrategy[str] | None = None,
) -> SearchStrategy[Spec]:
    """A hypothesis strategy for valid :class:`subagent.Spec` values (every limit in
    range, names without ``/``). Needs hypothesis.

    Args:
      model: The model every spec gets; ``None`` leaves it to the pool's defaults.
      names: A strategy for the names; by default short lowercase words.
    """
    from hypothesis import strategies as st

    name_strategy = names if names is not None else st.text(
        "abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=12
    )
    seconds = st.floats(0.001, 1e6, allow_nan=False, allow_infinity=False)
    return st.builds(
        Spec,
        name=name_strategy,
        description=st.text(max_size=40),
        model=st.just(model),
        system_prompt=st.text(max_size=40),
        agent_id=st.text("abcdefghijklmnopqrstuvwxyz-", max_size=12),
        max_turns=st.none() | st.integers(1, 20),
        timeout=st.none() | seconds,
        idle_timeout=st.none() | seconds,
        critical=st.booleans(),
        max_children=st.none() | st.integers(1, 8),
        max_messages=st.none() | st.integers(1, 100),
    )
