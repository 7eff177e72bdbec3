"""SubagentTool: the agentcore Tool through which a model delegates a task to a subagent."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

import agentcore
from agentcore import Liveness

from ._context import current_task
from ._errors import InvalidArgumentsError, SubagentError

if TYPE_CHECKING:
    from ._pool import Pool
    from ._task import Task

_ARGUMENTS = ("agent", "task")


def _invalid(text: str) -> InvalidArgumentsError:
    return InvalidArgumentsError(f"invalid arguments for the subagent tool: {text}")


def parse_arguments(arguments: str) -> tuple[str, str]:
    """The ``agent`` and ``task`` of the tool's JSON arguments.

    Raises:
      InvalidArgumentsError: they do not match the tool's schema.
    """
    try:
        value = json.loads(arguments)
    except (ValueError, TypeError) as exc:
        raise _invalid(f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise _invalid(f"expected a JSON object, not {type(value).__name__}")
    for key in value:
        if key not in _ARGUMENTS:
            raise _invalid(f"unknown argument {key!r}; the arguments are 'agent' and 'task'")
    found: list[str] = []
    for key in _ARGUMENTS:
        if key not in value:
            raise _invalid(f"missing required argument {key!r}")
        if not isinstance(value[key], str):
            raise _invalid(f"{key!r} must be a string, not {type(value[key]).__name__}")
        found.append(value[key])
    agent, task = found
    if not task.strip():
        raise _invalid("'task' must not be empty")
    return agent, task


class SubagentTool:
    """The delegation tool: the model names a registered agent and a task, and gets
    back that subagent's final answer as JSON (``agent``, ``path``, ``output``).

    It submits under the calling run's AgentPath, so paths compose and the
    pool's depth limit applies; while the caller waits, its concurrency slot
    is lent to the pool. Every failure (bad arguments, unknown agent, depth,
    closed pool, a failed, timed out or cancelled subagent) raises a
    :class:`SubagentError` whose message the agent loop turns into one error
    result. A task at the depth limit is not offered this tool.

    Args:
      pool: The pool that runs the subagents.
    """

    name = "subagent"
    read_only = False
    liveness = Liveness.self_monitoring

    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def __repr__(self) -> str:
        return f"<subagent.SubagentTool agents={sorted(self.pool.specs)}>"

    @property
    def description(self) -> str:
        """What the model is told the tool does."""
        return (
            "Delegate one task to a subagent and wait for its final answer. The subagent "
            "starts with a fresh conversation and sees only the task text, so make the task "
            "self-contained. Returns JSON with the agent, the subagent's path and its output."
        )

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON schema of the arguments, listing the agents registered now."""
        specs = self.pool.specs
        listing = "; ".join(
            f"{name}: {spec.description}" if spec.description else name
            for name, spec in sorted(specs.items())
        )
        return {
            "type": "object",
            "properties": {
                "agent": {
                    "type": "string",
                    "enum": sorted(specs),
                    "description": f"The subagent to run. Agents: {listing}",
                },
                "task": {
                    "type": "string",
                    "description": "The complete task for the subagent, verbatim.",
                },
            },
            "required": ["agent", "task"],
            "additionalProperties": False,
        }

    async def execute_monitored(self, arguments: str, fallback_timeout: float) -> str:
        """Like :meth:`execute`; the loop calls this (the ``SelfMonitoring`` contract)."""
        return await self.execute(arguments)

    async def execute(self, arguments: str) -> str:
        """Run the subagent and return its output as JSON. A checkpoint.

        Raises:
          SubagentError: any failure, with one message saying what went wrong.
        """
        agent, text = parse_arguments(arguments)
        pool = self.pool
        caller = current_task.get()
        run = agentcore.current_run()
        if caller is None or caller.pool is not pool or caller._run is not run:
            caller = None
        parent_path = caller.path if caller is not None else run.path if run is not None else ()
        failure: SubagentError | None = None
        if caller is not None:
            # The caller lends its slot while it waits (no nested deadlock); with
            # several delegations at once, the first lends it and the last takes it back.
            caller._delegating += 1
            if caller._delegating == 1:
                pool._release_slot(caller)
        try:
            output, path = await self._delegate(caller, parent_path, agent, text)
        except SubagentError as exc:
            failure = exc
        finally:
            if caller is not None:
                caller._delegating -= 1
        if caller is not None and caller._delegating == 0:
            await pool._reacquire_slot(caller)
        if failure is not None:
            raise failure
        return json.dumps({"agent": agent, "path": list(path), "output": output})

    async def _delegate(
        self, caller: Task | None, parent_path: tuple[str, ...], agent: str, text: str
    ) -> tuple[str, tuple[str, ...]]:
        call_id = caller._current_call_id if caller is not None else None
        child = await self.pool._submit(agent, text, parent_path, None, call_id)
        if caller is not None:
            caller._awaiting = child
        try:
            result = await child.wait()
        except SubagentError:
            raise
        except BaseException:
            # The caller is being cancelled or timed out: its subagent goes with it.
            child.cancel()
            with trio.CancelScope(shield=True):
                await child._done.wait()
            raise
        finally:
            if caller is not None and caller._awaiting is child:
                caller._awaiting = None
        return result.output, child.path
