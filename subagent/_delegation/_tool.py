"""SubagentTool: the agentcore Tool through which a model delegates a task to a subagent.

The delegation tools are the pool shell's one client outside ``subagent._pool``: they
claim a fan-out slot, submit a child, lend the caller's slot while it waits, through
the ``Pool``'s slot steps and its core's fan-out steps, each one call here.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import trio

import agentcore
from agentcore import ArgumentsError, Liveness, Tool, load_arguments

from .._core._core import CancelCause
from .._current import current_task
from .._durable._recovery import start_committed
from .._durable._resumable import Names, check_resumable
from .._errors import InvalidArgumentsError, SubagentError, TaskPaused, format_path
from .._reply import with_output
from .._specs._submission import Submission

if TYPE_CHECKING:
    from .._pool._pool import Pool
    from .._pool._task import Task

_ARGUMENTS = ("agent", "task", "wait")
_T = TypeVar("_T")

#: The bound on a call when there is no calling run to take a ``tool_timeout`` from.
DEFAULT_FALLBACK = 120.0


def invalid_arguments(tool: str, text: str) -> InvalidArgumentsError:
    """The error for bad arguments of the pool's tool ``tool``."""
    return InvalidArgumentsError(f"invalid arguments for the {tool} tool: {text}")


def _invalid(text: str) -> InvalidArgumentsError:
    return invalid_arguments("subagent", text)


def object_arguments(tool: str, arguments: str) -> dict[str, Any]:
    """The JSON object of a pool tool's ``arguments``, within agentcore's argument
    bounds. Not a checkpoint.

    Raises:
      InvalidArgumentsError: not JSON, too large or deep, or not an object.
    """
    try:
        value = load_arguments(arguments)
    except ArgumentsError as exc:
        raise invalid_arguments(tool, str(exc)) from None
    except (ValueError, TypeError) as exc:
        raise invalid_arguments(tool, f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise invalid_arguments(tool, f"expected a JSON object, not {type(value).__name__}")
    return value


def parse_arguments(arguments: str) -> tuple[str, str, bool]:
    """The ``agent``, ``task`` and ``wait`` (default true) of the tool's JSON arguments.

    Raises:
      InvalidArgumentsError: they do not match the tool's schema.
    """
    value = object_arguments("subagent", arguments)
    for key in value:
        if key not in _ARGUMENTS:
            raise _invalid(
                f"unknown argument {key!r}; the arguments are 'agent', 'task' and 'wait'"
            )
    found: list[str] = []
    for key in _ARGUMENTS[:2]:
        if key not in value:
            raise _invalid(f"missing required argument {key!r}")
        if not isinstance(value[key], str):
            raise _invalid(f"{key!r} must be a string, not {type(value[key]).__name__}")
        found.append(value[key])
    agent, task = found
    if not task.strip():
        raise _invalid("'task' must not be empty")
    wait = value.get("wait", True)
    if not isinstance(wait, bool):
        raise _invalid(f"'wait' must be true or false, not {type(wait).__name__}")
    return agent, task, wait


def calling_task(pool: Pool) -> Task | None:
    """The task of ``pool`` whose run is calling a tool now, if the caller is one."""
    caller = current_task.get()
    if caller is None or caller.pool is not pool or caller._run is not agentcore.current_run():
        return None
    return caller


def _delegating_call() -> str | None:
    # The id of the tool call this delegation runs in (set by agentcore around execute).
    call = agentcore.lowlevel.current_tool_call()
    return call.id if call is not None else None


def fallback_bound() -> float:
    """The calling run's ``tool_timeout`` (``DEFAULT_FALLBACK`` outside a run)."""
    run = agentcore.current_run()
    return run.agent.tool_timeout if run is not None else DEFAULT_FALLBACK


async def lend_slot(pool: Pool, caller: Task | None, fn: Callable[[], Awaitable[_T]]) -> _T:
    """Await ``fn()`` while ``caller`` lends its concurrency slot to ``pool``. A checkpoint.

    With several lending calls at once, the first lends the slot and the last takes
    it back, however ``fn`` ends: returning, raising, or cancelled. When the cancel
    comes from inside the run (a ``tool_timeout`` around the call, any scope the run
    goes on after), the slot is taken back before the ``Cancelled`` propagates (see
    ``subagent._pool._waits.take_back``), so the run never goes on without one.
    """
    if caller is None:
        return await fn()
    return await pool._lend_slot(caller, fn)


class SubagentTool:
    """The delegation tool: the model names a registered agent and a task, and gets
    back that subagent's final answer as JSON (``agent``, ``path``, ``output``).

    With ``"wait": false`` it starts the subagent in the background and returns at
    once (``agent``, ``path``, ``"status": "started"``); the result, or the error,
    comes into the calling run later as a user message (see ``RESULT_PREFIX`` in
    ``subagent._reply``) before a model call, with a ``result_delivered`` event;
    :class:`SubagentResultsTool` waits for it. Background delegation is open to runs
    of the pool's tasks.

    It submits under the calling run's AgentPath, so paths compose and the pool's
    depth limit applies. A run of the pool has at most ``max_children`` live
    subagents (its spec's, else the pool's); a delegation waits at most the pool's
    ``children_timeout`` for one to end. While the caller blocks, its concurrency
    slot is lent to the pool. Every failure (bad arguments, unknown agent, depth,
    fan-out, closed pool, a failed, timed out or cancelled subagent) raises a
    :class:`SubagentError` whose message the agent loop turns into one error result.
    A task at the depth limit is not offered this tool.

    Liveness: self-monitoring (``agentcore.SelfMonitoring``). A waited-for subagent is
    bounded by its spec's ``timeout`` and ``idle_timeout``; one with neither is bounded
    by the calling agent's ``tool_timeout`` (then cancelled, and the call fails).

    Which agents: the schema's ``enum`` lists the registered agents this tool may
    start (all, or those of ``agents``); a call naming another, or one the calling
    task's ``Spec.delegates_to`` leaves out, is refused with an
    :class:`InvalidArgumentsError` listing the allowed ones. The pool gives each task
    whose spec has ``delegates_to`` a copy limited to those (:meth:`limited`).

    Args:
      pool: The pool that runs the subagents.
      agents: The agent names it may start; ``None`` (the default) for all.
    """

    name = "subagent"
    read_only = False
    liveness = Liveness.self_monitoring
    #: A call of it can pause (its subagent paused) and continue on resume.
    resumes_paused_calls = True

    def __init__(self, pool: Pool, *, agents: Iterable[str] | None = None) -> None:
        self.pool = pool
        self.agents = None if agents is None else frozenset(agents)

    def __repr__(self) -> str:
        return f"<subagent.SubagentTool agents={self.offered()}>"

    def limited(self, agents: Iterable[str]) -> SubagentTool:
        """A copy that may start only those of its agents in ``agents``. Not a checkpoint."""
        clone = copy.copy(self)
        names = frozenset(agents)
        clone.agents = names if self.agents is None else self.agents & names
        return clone

    def offered(self, caller: Task | None = None) -> list[str]:
        """The registered agents it may start (for ``caller``, if given), sorted."""
        return [name for name in sorted(self.pool.specs) if self._permits(name, caller)]

    def _permits(self, agent: str, caller: Task | None) -> bool:
        if self.agents is not None and agent not in self.agents:
            return False
        limit = caller.spec.delegates_to if caller is not None else None
        return limit is None or agent in limit

    def _check_agent(self, agent: str, caller: Task | None) -> None:
        if self._permits(agent, caller):
            return
        allowed = self.offered(caller)
        listing = ", ".join(repr(name) for name in allowed)
        raise _invalid(
            f"'agent' must be one of the agents this run may delegate to ({listing}), not {agent!r}"
            if allowed
            else f"this run may not delegate to any agent (asked for {agent!r})"
        )

    @property
    def description(self) -> str:
        """What the model is told the tool does."""
        return (
            "Delegate one task to a subagent and wait for its final answer. The subagent "
            "starts with a fresh conversation and sees only the task text, so make the task "
            "self-contained. Returns JSON with the agent, the subagent's path and its output. "
            "With wait=false it returns at once and the result arrives later as a message."
        )

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON schema of the arguments, listing the agents registered now."""
        specs = self.pool.specs
        names = self.offered()
        listing = "; ".join(
            f"{name}: {specs[name].description}" if specs[name].description else name
            for name in names
        )
        return {
            "type": "object",
            "properties": {
                "agent": {
                    "type": "string",
                    "enum": names,
                    "description": f"The subagent to run. Agents: {listing}",
                },
                "task": {
                    "type": "string",
                    "description": "The complete task for the subagent, verbatim.",
                },
                "wait": {
                    "type": "boolean",
                    "description": "false: start it in the background; its result arrives "
                    "later as a message (default true: wait for it).",
                },
            },
            "required": ["agent", "task"],
            "additionalProperties": False,
        }

    async def execute(self, arguments: str) -> str:
        """Run one call bounded by the calling run's ``tool_timeout``; see
        :meth:`execute_monitored`. A checkpoint."""
        return await self.execute_monitored(arguments, fallback_bound())

    async def execute_monitored(self, arguments: str, fallback_timeout: float) -> str:
        """Run the subagent (or start it, with ``wait: false``). A checkpoint.

        Args:
          arguments: The JSON arguments.
          fallback_timeout: Bounds waiting for a subagent whose spec has neither
            ``timeout`` nor ``idle_timeout``.

        Raises:
          SubagentError: any failure, with one message saying what went wrong.
        """
        agent, text, wait = parse_arguments(arguments)
        pool = self.pool
        caller = calling_task(pool)
        self._check_agent(agent, caller)
        if not wait:
            if caller is None:
                raise SubagentError(
                    "wait: false is only open to runs of the pool's tasks; call with wait: true"
                )
            path = await self._start(caller, agent, text)
            return json.dumps({"agent": agent, "path": list(path), "status": "started"})
        run = agentcore.current_run()
        parent_path = caller.path if caller is not None else run.path if run is not None else ()
        try:
            child = await lend_slot(
                pool,
                caller, lambda: self._delegate(caller, parent_path, agent, text, fallback_timeout)
            )
        except TaskPaused as paused:
            # The subagent waits for a human: so does this call, and the calling run.
            raise agentcore.CallPaused(
                f"subagent {format_path(paused.path)} paused for approval", paused.state
            ) from None
        return with_output({"agent": agent, "path": list(child.path)}, child, child._output)

    async def _start(self, caller: Task, agent: str, text: str) -> tuple[str, ...]:
        resume = agentcore.lowlevel.resumed_call_state()
        if resume is not None:
            # Recovered after a crash with this start call in flight and its child
            # checkpointed (the call is tied to it by its id): continue that child,
            # never start a second one.
            spec = self.pool.specs[agent]
            check_resumable(Names(spec.agent_id, {t.name: t for t in spec.tools}), resume)
        child = await start_child(self.pool, caller, agent, text, _delegating_call(),
                                  resume=resume)
        return child.path


    async def _delegate(
        self,
        caller: Task | None,
        parent_path: tuple[str, ...],
        agent: str,
        text: str,
        fallback_timeout: float,
    ) -> Task:
        # The child, once it has ended with a result.
        pool = self.pool
        call_id = _delegating_call() if caller is not None else None
        resume = agentcore.lowlevel.resumed_call_state()
        if resume is not None:
            # A resumed run calls again for a subagent that paused: continue that run.
            spec = pool.specs[agent]
            check_resumable(Names(spec.agent_id, {t.name: t for t in spec.tools}), resume)
        if caller is not None and not pool._core.claim_fanout(caller._node):
            await pool._claim_child(caller, agent, True)
        try:
            child = await pool._submit(
                Submission(agent, text, parent_path, call_id=call_id, resume=resume), caller
            )
        except BaseException:
            if caller is not None:
                pool._apply(pool._core.release_fanout(caller._node))
            raise
        if caller is not None:
            pool._core.await_child(caller._node, child._node)
        spec = child.spec
        bound = math.inf if spec.timeout or spec.idle_timeout else fallback_timeout
        try:
            with trio.move_on_after(bound):
                await child.wait()
                return child
            child._cancel_for(CancelCause.timeout)
            with trio.CancelScope(shield=True):
                await child._wait_resolved()
            raise SubagentError(
                f"subagent {format_path(child.path)} gave no result within "
                f"{fallback_timeout:g}s and was cancelled (its spec has neither timeout "
                "nor idle_timeout, so the caller's tool_timeout bounds it)"
            )
        except SubagentError:
            raise
        except BaseException as exc:
            # The caller is being cancelled or timed out: its subagent goes with it,
            # unless it is critical and the caller was not hard-aborted (it then
            # finishes in the background; its result is delivered or orphaned).
            if (
                caller is not None
                and spec.critical
                and caller._node.cancel_cause is None
                and not child.done
            ):
                pool._core.to_background(caller._node, child._node)
            else:
                # (A child the caller's cancel reached already keeps that cause.)
                child._cancel_for(_cause_of(exc))
                with trio.CancelScope(shield=True):
                    await child._wait_resolved()
            raise
        finally:
            if caller is not None:
                pool._core.stop_awaiting(caller._node, child._node)


def _cause_of(exc: BaseException) -> CancelCause:
    # Who cancelled a delegating call that the caller's own cancel did not reach: a
    # deadline (the caller's timeout or idle_timeout, the call's tool_timeout), Ctrl-C,
    # else the caller's run stopped waiting (its abort, a sibling call's failure).
    if isinstance(exc, trio.Cancelled) and exc.source == "deadline":
        return CancelCause.timeout
    if isinstance(exc, KeyboardInterrupt):
        return CancelCause.interrupt
    return CancelCause.parent_ended


async def start_child(
    pool: Pool,
    caller: Task,
    agent: str,
    text: str,
    call_id: str | None,
    *,
    resume: agentcore.RunState | None = None,
) -> Task:
    """Start a background child of ``caller`` (``wait: false``), holding one of its
    fan-out slots; with ``resume``, it continues that paused run. A checkpoint (waits
    for a fan-out slot or room in the queue with ``caller``'s slot lent).

    A child resumed from a stored state is started only if ``caller``'s run may
    delegate to ``agent`` (as the call that started it had to): a state edited to
    name another agent cannot start it.

    Raises:
      SubagentError: no fan-out slot in time, the pool closed, an unknown agent, or
        (``resume``) an agent the caller's run may not delegate to.
    """
    if resume is not None:
        _check_delegates(pool, caller, agent)
    if not pool._core.claim_fanout(caller._node):
        await pool._claim_child(caller, agent, True)
    asked = Submission(agent, text, caller.path, call_id=call_id, background=True,
                       resume=resume)
    try:
        try:
            child = pool._accept(asked, caller)
        except trio.WouldBlock:
            # (Its submit returns once its start checkpoint is committed.)
            return await lend_slot(pool, caller, lambda: pool._submit(asked, caller))
    except BaseException:
        pool._apply(pool._core.release_fanout(caller._node))
        raise
    await start_committed(child)  # durable before the model is told it started
    return child


def _check_delegates(pool: Pool, caller: Task, agent: str) -> None:
    # Raise unless a delegation tool of ``caller``'s run (limited by its spec and depth)
    # may start ``agent`` in ``pool``.
    run = caller._run
    for tool in run.agent.tools_by_name.values() if run is not None else ():
        if isinstance(tool, SubagentTool) and tool.pool is pool:
            tool._check_agent(agent, caller)
            return
    raise _invalid(f"this run may not delegate to any agent (asked for {agent!r})")


def limit_delegation(tools: tuple[Tool, ...], agents: Iterable[str]) -> tuple[Tool, ...]:
    """``tools`` with each :class:`SubagentTool` limited to ``agents`` (one that may
    start no registered agent is left out). Not a checkpoint."""
    names = frozenset(agents)
    limited: list[Tool] = []
    for tool in tools:
        if isinstance(tool, SubagentTool):
            tool = tool.limited(names)
            if not tool.offered():
                continue
        limited.append(tool)
    return tuple(limited)
