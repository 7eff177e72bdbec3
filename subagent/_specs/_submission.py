"""Submission: what one submit asks a pool for (a value), from ``Pool.submit``,
``Pool.resume`` and the delegation tools alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import agentcore
    from agentcore import AgentPath, Message

    from .._stream import Stream


class Submission(NamedTuple):
    """A run of the spec ``name`` on ``input``, asked of a pool (``Pool._submit``,
    ``Pool._accept``). A NamedTuple rather than ``attrs.frozen``: one is built per
    submit, and a frozen attrs ``__init__`` (an ``object.__setattr__`` per field)
    cost 0.4% more of a W1 run's instructions (``bench.cg_w1``).

    Attributes:
      name: A registered spec's name.
      input: The task text.
      parent_path: The AgentPath the task runs under.
      events: Where its events go (None: the parent task's stream, else the pool's).
      call_id: The id of the tool call that delegated it, if one did.
      background: Whether its result is delivered into the parent run later
        (``wait: false``; ``subagent._pool._ending``).
      history: The checked messages the run starts from (``check_history``).
      resume: The paused run's state the task continues (``Pool.resume``).
    """

    name: str
    input: str
    parent_path: AgentPath = ()
    events: Stream | None = None
    call_id: str | None = None
    background: bool = False
    history: tuple[Message, ...] = ()
    resume: agentcore.RunState | None = None
