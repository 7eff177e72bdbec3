"""SubagentResultsTool: the tool a run uses to wait for its background subagents."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from agentcore import Liveness

from .._core._core import TaskStatus
from .._errors import InvalidArgumentsError, SubagentError, format_path
from ._paused import has_kept, kept_count
from ._tool import calling_task, fallback_bound, invalid_arguments, lend_slot, object_arguments

if TYPE_CHECKING:
    from .._pool._pool import Pool
    from .._pool._task import Task


def _invalid(text: str) -> InvalidArgumentsError:
    return invalid_arguments("subagent_results", text)


def parse_results_arguments(arguments: str) -> tuple[bool, float | None]:
    """The ``all`` (default true) and ``timeout`` (default None) of the JSON arguments.

    Raises:
      InvalidArgumentsError: they do not match the tool's schema.
    """
    value = object_arguments("subagent_results", arguments)
    for key in value:
        if key not in ("all", "timeout"):
            raise _invalid(f"unknown argument {key!r}; the arguments are 'all' and 'timeout'")
    every = value.get("all", True)
    if not isinstance(every, bool):
        raise _invalid(f"'all' must be true or false, not {type(every).__name__}")
    timeout = value.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
    ):
        raise _invalid(f"'timeout' must be a positive number of seconds, not {timeout!r}")
    return every, None if timeout is None else float(timeout)


def _note(caller: Task, waited: float | None) -> str:
    node = caller._node
    # A child that paused for approval has no result: the tree pauses, and it is
    # resumed as a background child of the resumed run (its result comes then).
    paused = sorted(format_path(child.handle.path) for child in node.unread
                    if child.handle.status is TaskStatus.paused)
    # Results kept in a paused state are in the resumed run's inbox, not in the tree.
    arrived = len(node.unread) - len(paused) + kept_count(caller)
    running = sorted(format_path(child.path) for child in node.background)
    if not arrived and not running and not paused:
        return "no background subagents: nothing to wait for"
    text = f"{arrived} result{'' if arrived == 1 else 's'} arrived"
    if arrived:
        text += " (they follow as messages)"
    if running:
        text += f"; still running: {', '.join(running)}"
    if paused:
        text += (f"; paused for approval: {', '.join(paused)} (no result yet: call "
                 "subagent_results again after the approval)")
    if waited is not None:
        text = f"stopped waiting after {waited:g}s: {text}"
    return text


class SubagentResultsTool:
    """The tool named ``subagent_results``: wait for this run's background subagents.

    Offer it next to a :class:`SubagentTool` whose calls use ``"wait": false``. It
    blocks until every (``"all": true``, the default) or at least one (``"all":
    false``) of the calling run's background subagents has a result waiting, then
    returns a short note (``"3 results arrived (they follow as messages)"``, with
    the paths still running, if any, and those paused for approval: a child that
    paused has no result, and the tree pauses with it). The results themselves come into the run as
    messages before its next model call. While it waits, the caller's concurrency
    slot is lent to the pool.

    Liveness: self-monitoring. A call waits at most its ``timeout`` argument, else
    the calling agent's ``tool_timeout``; then it returns the note, prefixed with
    ``stopped waiting after <t>s``. Only runs of the pool's tasks have background
    subagents; from any other caller it fails.

    Args:
      pool: The pool whose tasks call it.
    """

    name = "subagent_results"
    read_only = True
    liveness = Liveness.self_monitoring

    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def __repr__(self) -> str:
        return "<subagent.SubagentResultsTool>"

    @property
    def description(self) -> str:
        """What the model is told the tool does."""
        return (
            "Wait for the subagents you started with wait=false. all=true (default) waits "
            "for every one of them, all=false for the first. Their results follow as messages."
        )

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON schema of the arguments."""
        return {
            "type": "object",
            "properties": {
                "all": {
                    "type": "boolean",
                    "description": "true: wait for every background subagent; false: for one.",
                },
                "timeout": {
                    "type": "number",
                    "description": "The most seconds to wait.",
                },
            },
            "additionalProperties": False,
        }

    async def execute(self, arguments: str) -> str:
        """Wait, bounded by the calling run's ``tool_timeout``; see :meth:`execute_monitored`."""
        return await self.execute_monitored(arguments, fallback_bound())

    async def execute_monitored(self, arguments: str, fallback_timeout: float) -> str:
        """Wait for the calling run's background results; return a note. A checkpoint.

        Args:
          arguments: The JSON arguments (``all``, ``timeout``).
          fallback_timeout: The bound when the arguments give no ``timeout``.

        Raises:
          SubagentError: bad arguments, or the caller is not a run of the pool's tasks.
        """
        every, timeout = parse_results_arguments(arguments)
        caller = calling_task(self.pool)
        if caller is None:
            raise SubagentError(
                "subagent_results is only open to runs of the pool's tasks "
                "(they alone start background subagents)"
            )
        bound = timeout if timeout is not None else fallback_timeout

        node = caller._node

        def settled() -> bool:
            if every:
                return not node.background
            return bool(node.unread) or not node.background or has_kept(caller)

        async def wait() -> bool:
            with trio.move_on_after(bound):
                while not settled():
                    await caller._next_arrival()
                return True
            return False

        if settled():
            await trio.lowlevel.checkpoint()
            return _note(caller, None)
        done = await lend_slot(self.pool, caller, wait)
        return _note(caller, None if done else bound)
