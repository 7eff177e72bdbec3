"""The subagent error hierarchy: every error the package raises derives from SubagentError."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import agentcore
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


class InvalidHistoryError(SubagentError):
    """A submit's ``history`` cannot start a run: a value of the wrong type, tool calls
    and answers out of order, or more than the pool's ``max_history_messages`` or
    ``max_history_bytes``. The message names the first fault found.

    Attributes:
      index: The position in the history of the message at fault, or None when the
        fault is the history as a whole (its type or its number of messages).
    """

    def __init__(self, message: str, index: int | None) -> None:
        super().__init__(message)
        self.index = index


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


class BudgetExceeded(TaskFailed):
    """A budget was spent (see :class:`subagent.Budget`): the subtree it covers was
    stopped, and the task that owns it failed with this error.

    Raised by :meth:`Task.wait` of the task that owns the budget (a root task, for
    the pool's budget), and by a submit that a spent budget refuses.

    Attributes:
      path: The task that failed (or, for a refused submit, the budget's owner).
      owner: The AgentPath of the task that owns the budget; ``()`` for the pool's.
      limit: The limit reached: ``tokens``, ``input_tokens``, ``output_tokens``,
        ``cost``, ``model_calls`` or ``tasks``.
      allowed: Its value in the budget.
      spent: What the subtree had spent of it then (``None``: a cost that is unknown).
      by: The AgentPath whose model call (or under which a submit) reached the limit.
    """

    def __init__(
        self,
        message: str,
        path: AgentPath,
        *,
        owner: AgentPath,
        limit: str,
        allowed: float,
        spent: float | None,
        by: AgentPath,
    ) -> None:
        super().__init__(message, path)
        self.owner = owner
        self.limit = limit
        self.allowed = allowed
        self.spent = spent
        self.by = by


class TaskPaused(TaskError):
    """The task's run paused: a gate deferred a call to a human.

    Attributes:
      state: The run's ``agentcore.RunState``: answer its ``pending_approvals``,
        store it (``to_json``) if the answer takes a while, and continue it with
        :meth:`Pool.resume`.
    """

    def __init__(self, message: str, path: tuple[str, ...], state: agentcore.RunState) -> None:
        super().__init__(message, path)
        self.state = state
