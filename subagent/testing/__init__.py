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
from collections.abc import Mapping
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

from .._specs._spec import Spec
from ._checker import EventLogError as EventLogError
from ._checker import EventLogReport as EventLogReport
from ._checker import check_events as check_events

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
