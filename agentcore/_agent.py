"""The Agent: one agent's configuration, and the entry points that run it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from ._errors import ConfigurationError
from ._events import EventSink
from ._gate import ToolGate
from ._messages import AgentPath, Message, ToolSpec
from ._models import ChatModel
from ._tools import Tool, tool_spec

if TYPE_CHECKING:
    from ledger import Sink

    from ._run import Run, RunResult


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigurationError(f"Agent {name} must be positive, not {value!r}")


@attrs.define(eq=False, init=False)
class Agent:
    """One agent: a model, its tools, its prompt, and the limits its runs obey.

    An Agent holds configuration only; every :meth:`run` starts from a fresh
    conversation, so one Agent can run many inputs, even concurrently.

    Args:
      model: The :class:`ChatModel` to call.
      tools: The tools offered to the model (names must be unique).
      system_prompt: The system message; empty for none.
      agent_id: A label carried by events and audit entries.
      max_turns: Model calls allowed per run (at least 1).
      gate: Decides every tool call before it runs; ``None`` allows all.
      audit: A ``ledger.Sink`` recording the run; ``None`` records nothing.
      tool_timeout: Seconds an opaque tool call may take before it gets a
        timed-out error result.
      gate_timeout: Seconds a gate may take; a gate that does not decide in time denies.
      end_timeout: Seconds the shielded, final ``agent_end`` emit and audit may take
        when the run is cancelled.

    Raises:
      ConfigurationError: a duplicate tool name or a limit that is not positive.
    """

    model: ChatModel
    tools: tuple[Tool, ...]
    system_prompt: str
    agent_id: str
    max_turns: int
    gate: ToolGate | None
    audit: Sink | None
    tool_timeout: float
    gate_timeout: float
    end_timeout: float
    tools_by_name: dict[str, Tool]
    tool_specs: tuple[ToolSpec, ...]
    streams: bool

    def __init__(
        self,
        *,
        model: ChatModel,
        tools: Sequence[Tool] = (),
        system_prompt: str = "",
        agent_id: str = "",
        max_turns: int = 20,
        gate: ToolGate | None = None,
        audit: Sink | None = None,
        tool_timeout: float = 120.0,
        gate_timeout: float = 120.0,
        end_timeout: float = 5.0,
    ) -> None:
        if max_turns < 1:
            raise ConfigurationError(f"Agent max_turns must be at least 1, not {max_turns!r}")
        _positive("tool_timeout", tool_timeout)
        _positive("gate_timeout", gate_timeout)
        _positive("end_timeout", end_timeout)
        by_name: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in by_name:
                raise ConfigurationError(f"Agent has two tools named {tool.name!r}")
            by_name[tool.name] = tool
        self.model = model
        self.tools = tuple(tools)
        self.system_prompt = system_prompt
        self.agent_id = agent_id
        self.max_turns = max_turns
        self.gate = gate
        self.audit = audit
        self.tool_timeout = tool_timeout
        self.gate_timeout = gate_timeout
        self.end_timeout = end_timeout
        self.tools_by_name = by_name
        self.tool_specs = tuple(tool_spec(t) for t in self.tools)
        self.streams = callable(getattr(model, "stream", None))

    def new_run(
        self,
        input: str,
        *,
        path: AgentPath = (),
        emit: EventSink | None = None,
        run_id: str | None = None,
        history: Sequence[Message] = (),
    ) -> Run:
        """Prepare one run of ``input`` without starting it; not a checkpoint.

        The returned :class:`Run` is the handle other tasks use to steer or
        interrupt it; ``await run.run()`` executes it.

        Args:
          input: The user message.
          path: The AgentPath of the run (shown to the gate and recorded in the audit).
          emit: Awaited with each event, in order; ``None`` emits nothing.
          run_id: The id events and audit entries carry; a fresh one by default.
          history: Messages placed between the system prompt and the input.
        """
        from ._run import Run

        return Run(self, input, path=path, emit=emit, run_id=run_id, history=history)

    async def run(
        self,
        input: str,
        *,
        path: AgentPath = (),
        emit: EventSink | None = None,
        run_id: str | None = None,
        history: Sequence[Message] = (),
    ) -> RunResult:
        """Run ``input`` to a final answer. A checkpoint.

        Same arguments as :meth:`new_run`. A failing model does not raise: the
        result's ``summary.end_reason`` is ``error`` and ``exception`` holds the
        cause. Cancellation ends the run ``aborted`` (``agent_end`` is still
        emitted) and propagates.
        """
        return await self.new_run(
            input, path=path, emit=emit, run_id=run_id, history=history
        ).run()
