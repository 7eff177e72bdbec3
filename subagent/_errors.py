"""The subagent error hierarchy: every error the package raises derives from SubagentError."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentcore import AgentPath


def format_path(path: AgentPath) -> str:
    """An AgentPath as readable text: its segments joined by ``/`` (``(root)`` for none)."""
    return "/".join(path) if path else "(root)"


class SubagentError(Exception):
    """Base class of every error the subagent package raises."""


class SpecError(SubagentError):
    """A Spec cannot be registered (no model after inheritance, a bad name or limit)."""


class UnknownAgentError(SubagentError):
    """A submit or a delegation named an agent the pool does not have.

    Attributes:
      name: The name asked for.
      registered: The names the pool has, sorted.
    """

    def __init__(self, name: str, registered: tuple[str, ...]) -> None:
        known = ", ".join(registered) if registered else "none are registered"
        super().__init__(f"unknown agent {name!r}; registered agents: {known}")
        self.name = name
        self.registered = registered


class MaxDepthError(SubagentError):
    """A submit would nest a task deeper than the pool's ``max_depth``.

    Attributes:
      parent_path: The path the task would have been submitted under.
      max_depth: The pool's limit.
    """

    def __init__(
        self,
        name: str,
        parent_path: AgentPath,
        max_depth: int,
        caller: AgentPath | None = None,
        depth: int | None = None,
    ) -> None:
        if caller is not None and depth is not None:
            where = (
                f" from within the run of {format_path(caller)}: that would be depth "
                f"{depth} (a task started from within a run counts one level below it)"
            )
        else:
            where = f": that would be depth {len(parent_path) + 1}"
        super().__init__(
            f"cannot run agent {name!r} under {format_path(parent_path)}{where}, "
            f"and the pool's max_depth is {max_depth}"
        )
        self.parent_path = parent_path
        self.max_depth = max_depth


class PoolClosedError(SubagentError):
    """The pool was closed (or cancelled) and accepts no new task from outside."""


class MaxChildrenError(SubagentError):
    """A delegation waited ``children_timeout`` for one of its run's ``max_children``
    live subagents to end, and none did."""


class InvalidArgumentsError(SubagentError):
    """The delegation tool was called with arguments that do not match its schema."""


class TaskError(SubagentError):
    """Base class of the ways a task can end without a result.

    Attributes:
      path: The AgentPath of the task.
    """

    def __init__(self, message: str, path: AgentPath) -> None:
        super().__init__(message)
        self.path = path


class TaskFailed(TaskError):
    """The task's run ended ``error``; the exception that ended it is chained as the cause."""


class TaskCancelled(TaskError):
    """The task was cancelled (its own cancel, an ancestor's, or the pool's)."""


class TaskTimeout(TaskError):
    """The task's run exceeded its Spec's ``timeout`` or ``idle_timeout``."""
