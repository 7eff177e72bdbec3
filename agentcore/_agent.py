"""The Agent: one agent's configuration, and the entry points that run it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ._errors import ConfigurationError
from ._events import EventSink
from ._history import MessageCounter, count_chars
from ._hookset import NO_HOOKS, HookSet
from ._messages import AgentPath, Message, ToolSpec
from ._models import ChatModel
from ._retry import DEFAULT_RETRY, RetryPolicy
from ._run._output import DEFAULT_OUTPUT_RETRIES, FINAL_RESULT, OutputSchema, output_schema
from ._run._run import Run
from ._tools._gate import ToolGate
from ._tools._tools import Liveness, Tool, check_liveness, is_read_only, tool_spec

if TYPE_CHECKING:
    from ledger import Sink

    from ._run._checkpoint import Checkpointer
    from ._run._result import RunResult
    from ._run._state import RunState


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
      hooks: Observers and interceptors of each run (see :class:`HookResult`),
        called in ascending ``priority``.
      hook_timeout: Seconds one hook call may take before it is skipped with an
        ``error`` event (a ``before_tool`` hook fails closed: its call is denied).
      max_parallel_tools: At most this many of a turn's consecutive read-only tool
        calls run at once.
      max_messages: Before each model call, the oldest non-system messages are
        dropped while the history has more messages than this (an assistant's
        tool calls go with their results); None for no bound.
      history_limit: The same, while the sum of ``history_counter`` over the
        messages exceeds this; None for no bound.
      history_counter: Measures one message for ``history_limit`` (default:
        characters, :func:`count_chars`; or :func:`estimate_tokens`).
      retry: How model calls are retried (:class:`RetryPolicy`).
      output_type: The type a run must answer with (any type ``@tool`` takes as a
        parameter, or an :class:`OutputSchema`); ``None`` for a text answer. The
        run offers a ``final_result`` tool whose arguments are the answer; see
        ``RunResult.structured``.
      output_retries: Invalid answers a typed run may follow with another try; the
        next one ends the run ``error`` with :class:`OutputValidationError`.
      checkpoint: Awaited with a :class:`Checkpoint` of each run at every turn
        boundary, before each call of a tool that is not read-only, and at its end
        (see ``agentcore._run._checkpoint``); ``None`` (the default) costs nothing.

    Raises:
      ConfigurationError: a duplicate tool name, a tool whose declared liveness
        class and contract disagree (see :class:`SelfMonitoring`), a limit
        that is not positive, an ``output_type`` msgspec does not support, or a
        tool named ``final_result`` beside an ``output_type``.
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
    hooks: tuple[object, ...]
    hook_timeout: float
    max_parallel_tools: int
    max_messages: int | None
    history_limit: int | None
    history_counter: MessageCounter
    retry: RetryPolicy
    output: OutputSchema | None
    output_retries: int
    checkpoint: Checkpointer | None
    tools_by_name: dict[str, Tool]
    tool_specs: tuple[ToolSpec, ...]
    streams: bool
    hookset: HookSet
    read_only_names: frozenset[str]
    self_monitoring_names: frozenset[str]
    budgeted: bool
    # What system_message() returned last (rebuilt if system_prompt was reassigned).
    _system_message: Message | None = attrs.field(default=None, repr=False)

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
        hooks: Sequence[object] = (),
        hook_timeout: float = 5.0,
        max_parallel_tools: int = 8,
        max_messages: int | None = None,
        history_limit: int | None = None,
        history_counter: MessageCounter = count_chars,
        retry: RetryPolicy = DEFAULT_RETRY,
        output_type: Any = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        checkpoint: Checkpointer | None = None,
    ) -> None:
        if max_turns < 1:
            raise ConfigurationError(f"Agent max_turns must be at least 1, not {max_turns!r}")
        _positive("tool_timeout", tool_timeout)
        _positive("gate_timeout", gate_timeout)
        _positive("end_timeout", end_timeout)
        _positive("hook_timeout", hook_timeout)
        _positive("max_parallel_tools", max_parallel_tools)
        if max_messages is not None:
            _positive("max_messages", max_messages)
        if history_limit is not None:
            _positive("history_limit", history_limit)
        if isinstance(output_retries, bool) or not isinstance(output_retries, int) or (
            output_retries < 0
        ):
            raise ConfigurationError(
                f"Agent output_retries must be an integer of at least 0, not {output_retries!r}"
            )
        output = None if output_type is None else output_schema(output_type)
        by_name: dict[str, Tool] = {}
        monitoring: set[str] = set()
        for tool in tools:
            if tool.name in by_name:
                raise ConfigurationError(f"Agent has two tools named {tool.name!r}")
            by_name[tool.name] = tool
            if check_liveness(tool) is Liveness.self_monitoring:
                monitoring.add(tool.name)
        self.model = model
        self.tools = tuple(tools)
        self.system_prompt = system_prompt
        self._system_message = None
        self.agent_id = agent_id
        self.max_turns = max_turns
        self.gate = gate
        self.audit = audit
        self.tool_timeout = tool_timeout
        self.gate_timeout = gate_timeout
        self.end_timeout = end_timeout
        self.tools_by_name = by_name
        self.tool_specs = tuple(tool_spec(t) for t in self.tools)
        if output is not None:
            if FINAL_RESULT in by_name:
                raise ConfigurationError(
                    f"Agent has a tool named {FINAL_RESULT!r} and an output_type: the "
                    "run offers its own final_result tool; rename the tool"
                )
            self.tool_specs += (output.tool_spec,)
        self.output = output
        self.output_retries = output_retries
        self.checkpoint = checkpoint
        self.streams = callable(getattr(model, "stream", None))
        self.hooks = tuple(hooks)
        self.hook_timeout = hook_timeout
        self.max_parallel_tools = max_parallel_tools
        self.max_messages = max_messages
        self.history_limit = history_limit
        self.history_counter = history_counter
        self.retry = retry
        self.hookset = HookSet(self.hooks) if hooks else NO_HOOKS
        self.read_only_names = frozenset(t.name for t in self.tools if is_read_only(t))
        self.self_monitoring_names = frozenset(monitoring)
        self.budgeted = max_messages is not None or history_limit is not None

    def system_message(self) -> Message | None:
        """The system message every run of this Agent starts with (one value, shared
        by its runs: a Message is frozen), or None without a system prompt. Not a
        checkpoint."""
        if not self.system_prompt:
            return None
        message = self._system_message
        if message is None or message.content is not self.system_prompt:
            message = self._system_message = Message("system", self.system_prompt)
        return message

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
        emitted) and propagates. Use :meth:`new_run` to steer or interrupt it.
        """
        return await self.new_run(
            input, path=path, emit=emit, run_id=run_id, history=history
        ).run()

    def new_run_from(self, state: RunState, *, emit: EventSink | None = None) -> Run:
        """Prepare the resume of a paused run from its ``state``; not a checkpoint.

        Tools, the model, the gate, hooks and the audit sink are this Agent's: the
        state names tools, and its agent id must be this Agent's. The returned
        :class:`Run` owns ``state`` from now on (it is no longer paused), keeps its
        run id, path, counters and conversation; ``await run.run()`` continues it.

        Raises:
          ResumeError: the state is not paused, is another agent's, holds delegated
            runs' states (resume those with the pool), has a deferred call not yet
            answered, or an approved call of a tool this Agent does not have.
        """
        from ._run._resume import check_resumable

        check_resumable(self, state)
        return Run(self, state.input, path=state.path, emit=emit, run_id=state.run_id,
                   history=(), resume=state)

    async def resume(self, state: RunState, *, emit: EventSink | None = None) -> RunResult:
        """Continue a paused run from its ``state`` to its end. A checkpoint.

        Continues exactly where it stopped: the paused turn's calls are finished in
        call order (approved calls run, their ``gate_decision`` being the human's;
        denied ones get the error result ``denied: <reason>``; calls that had not
        started are gated and run as usual), then the loop goes on. The
        conversation, counters and events are those the run would have had if the
        gate had answered at once; the audit chain gets an ``approval`` entry per
        answer and a ``run_resumed`` entry first. It may pause again.

        Raises:
          ResumeError: as :meth:`new_run_from`.
        """
        return await self.new_run_from(state, emit=emit).run()
