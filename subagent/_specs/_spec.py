"""Specs (what a subagent is) and the pool's Defaults they inherit from."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import attrs

from agentcore import (
    ChatModel,
    ConfigurationError,
    OutputSchema,
    RetryPolicy,
    Run,
    Tool,
    ToolGate,
    nested_gate,
)
from agentcore._run._output import output_schema

from .._cost._budget import Budget
from .._errors import SpecError, format_path

if TYPE_CHECKING:
    from ledger import Sink


def _tools(value: Iterable[Tool]) -> tuple[Tool, ...]:
    return tuple(value)


def _names(value: Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise SpecError(
            f"Spec delegates_to must be a sequence of agent names, not the string {value!r}"
        )
    return tuple(value)


def _hooks(value: Iterable[object] | None) -> tuple[object, ...] | None:
    return None if value is None else tuple(value)


#: The agent settings a Spec inherits from Defaults field by field, each passed to
#: the task's ``agentcore.Agent`` under the same name; ``None`` leaves agentcore's default.
AGENT_SETTINGS = (
    "hooks",
    "tool_timeout",
    "hook_timeout",
    "retry",
    "max_parallel_tools",
    "history_limit",
    "output_retries",
)


def agent_settings(spec: Spec) -> dict[str, Any]:
    """The agent settings ``spec`` sets (and its ``output_type``), as
    ``agentcore.Agent`` keyword arguments."""
    values = {name: getattr(spec, name) for name in (*AGENT_SETTINGS, "output_type")}
    return {name: value for name, value in values.items() if value is not None}


@attrs.frozen
class Defaults:
    """What a :class:`Spec` inherits for each field it leaves unset.

    A pool's defaults usually carry the parent program's model and its safety
    controls (gate, audit sink), so every subagent shares them.

    Attributes:
      model: The model of specs that name none.
      gate: The tool gate of specs that name none.
      audit: The ``ledger.Sink`` of specs that name none.
      agent_id: The agent id of specs that name none (else the spec's name is used).
      hooks: The agent settings of specs that leave them ``None`` (see
        :class:`Spec`); ``None`` here leaves agentcore's default. So are
        ``tool_timeout``, ``hook_timeout``, ``retry``, ``max_parallel_tools``,
        ``history_limit`` and ``output_retries``.
      budget: The :class:`Budget` of specs that name none (each task owns its own).
    """

    model: ChatModel | None = None
    gate: ToolGate | None = None
    audit: Sink | None = None
    agent_id: str = ""
    hooks: tuple[object, ...] | None = attrs.field(default=None, converter=_hooks)
    tool_timeout: float | None = None
    hook_timeout: float | None = None
    retry: RetryPolicy | None = None
    max_parallel_tools: int | None = None
    history_limit: int | None = None
    output_retries: int | None = None
    budget: Budget | None = None


@attrs.frozen
class Spec:
    """One kind of subagent: its name, what it is for, and how its runs are configured.

    Fields left ``None`` (or ``""`` for ``agent_id``) inherit the pool's
    :class:`Defaults`. Every task builds a fresh agent from its spec.

    Attributes:
      name: The name tasks and the delegation tool use (no ``/``).
      description: What the agent is for; the model sees it when choosing one.
      model: The ChatModel.
      tools: The tools offered; add ``SubagentTool(pool)`` to let it delegate.
      system_prompt: Its instructions (the subagent framing is appended).
      agent_id: The label on its events and audit entries.
      max_turns: Model calls per run; ``None`` for the agentcore default.
      gate: The tool gate.
      audit: The ``ledger.Sink`` recording its runs and task lifecycle.
      timeout: Wall-clock seconds a run may take; ``None`` for no limit.
      idle_timeout: Seconds a run may go without an event (its own or a
        descendant's) before it is aborted; ``None`` disables the watchdog. Its
        resolution is 10 ms: events less than 10 ms after the one that last pushed
        the watchdog back do not push it again (``subagent._pool._emitter.PUSH_RESOLUTION``).
      critical: Whether it keeps running when its parent run ends other than by a
        hard abort (its result then becomes a ``task_orphaned`` event); a
        non-critical background subagent is cancelled then. A hard abort
        (``Task.cancel``, ``Pool.cancel``) reaches critical subagents too.
      max_children: Live subagents one of its runs may start through the delegation
        tool; ``None`` for the pool's.
      max_messages: The most messages its conversation keeps (default 50): before
        each model call the oldest non-system ones are dropped; ``None`` for no bound.
      delegates_to: The agents its runs may delegate to through the delegation tool
        (the tool lists only those, and refuses any other); ``None`` (the default)
        for every registered agent, ``()`` for none (the tool is then not offered).
      hooks: The ``agentcore`` hooks of its runs (observers and interceptors);
        ``()`` for none, whatever the defaults say.
      tool_timeout: Seconds one opaque tool call may take (``Agent(tool_timeout=)``).
      hook_timeout: Seconds one hook call may take (``Agent(hook_timeout=)``).
      retry: How its model calls are retried (an ``agentcore.RetryPolicy``).
      max_parallel_tools: At most this many of a turn's read-only tool calls run at once.
      history_limit: The bound on the summed size of its conversation
        (``Agent(history_limit=)``, characters by default).
      output_type: The type its runs answer with (``Agent(output_type=)``: any type
        ``agentcore.tool`` takes as a parameter, or an ``agentcore.OutputSchema``
        such as :class:`JsonSchemaOutput`); ``None`` for a text answer. Not
        inherited. Its ``Result.structured`` is the decoded value, ``Result.output``
        its JSON, and the delegation tool hands the parent that JSON. ``inherit``
        (at ``register``) turns a type into its ``agentcore.TypedOutput`` once.
      output_retries: Invalid answers a typed run may follow with another try
        (``Agent(output_retries=)``, default 2).
      budget: What each of its tasks' subtree may spend (a :class:`Budget`: tokens,
        cost, model calls, tasks); ``None`` inherits the defaults'.

    ``hooks`` to ``history_limit`` and ``output_retries`` are agent settings:
    ``None`` inherits the pool's :class:`Defaults`, and ``None`` there leaves
    agentcore's own default.

    Delegation cannot widen permission: a task started from within a run (by the
    delegation tool, or any submit made while the run calls a tool or hook) gets
    as its gate its own ``gate`` and, above it, the starting run's effective gate
    (see :func:`delegated`): a call runs only if every gate on its path allows it.
    """

    name: str
    description: str = ""
    model: ChatModel | None = None
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_tools)
    system_prompt: str = ""
    agent_id: str = ""
    max_turns: int | None = None
    gate: ToolGate | None = None
    audit: Sink | None = None
    timeout: float | None = None
    idle_timeout: float | None = 300.0
    critical: bool = False
    max_children: int | None = None
    max_messages: int | None = 50
    delegates_to: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    hooks: tuple[object, ...] | None = attrs.field(default=None, converter=_hooks)
    tool_timeout: float | None = None
    hook_timeout: float | None = None
    retry: RetryPolicy | None = None
    max_parallel_tools: int | None = None
    history_limit: int | None = None
    output_type: Any = None
    output_retries: int | None = None
    budget: Budget | None = None

    def inherit(self, defaults: Defaults) -> Spec:
        """This spec with its unset fields taken from ``defaults``; not a checkpoint.

        Raises:
          SpecError: the spec is unusable (no model after inheritance, a bad
            name or limit); the message names the spec and the field.
        """
        resolved = attrs.evolve(
            self,
            model=self.model if self.model is not None else defaults.model,
            gate=self.gate if self.gate is not None else defaults.gate,
            audit=self.audit if self.audit is not None else defaults.audit,
            agent_id=self.agent_id or defaults.agent_id or self.name,
            budget=self.budget if self.budget is not None else defaults.budget,
            **{
                name: getattr(defaults, name)
                for name in AGENT_SETTINGS
                if getattr(self, name) is None
            },
        )
        resolved._check()
        if resolved.output_type is not None and not isinstance(resolved.output_type, OutputSchema):
            # Built once here, so each task's Agent reuses the schema and decoder.
            try:
                schema = output_schema(resolved.output_type)
            except ConfigurationError as exc:
                raise SpecError(f"spec {self.name!r}: {exc}") from None
            resolved = attrs.evolve(resolved, output_type=schema)
        return resolved

    def _check(self) -> None:
        def bad(text: str) -> SpecError:
            return SpecError(f"spec {self.name!r}: {text}")

        if not self.name or "/" in self.name:
            raise SpecError(f"a spec's name must be non-empty without '/', not {self.name!r}")
        if self.model is None:
            raise bad("no model: give the spec a model or the pool a default model")
        if self.max_turns is not None and self.max_turns < 1:
            raise bad(f"max_turns must be at least 1, not {self.max_turns!r}")
        for field in ("timeout", "idle_timeout", "tool_timeout", "hook_timeout"):
            value = getattr(self, field)
            if value is not None and not (value > 0 and not math.isnan(value)):
                raise bad(f"{field} must be positive or None, not {value!r}")
        if self.max_children is not None and self.max_children < 1:
            raise bad(f"max_children must be at least 1, not {self.max_children!r}")
        for field in ("max_messages", "max_parallel_tools", "history_limit"):
            value = getattr(self, field)
            if value is not None and value < 1:
                raise bad(f"{field} must be at least 1, not {value!r}")
        retries = self.output_retries
        if retries is not None and (
            isinstance(retries, bool) or not isinstance(retries, int) or retries < 0
        ):
            raise bad(f"output_retries must be an integer of at least 0, not {retries!r}")
        if self.retry is not None and not isinstance(self.retry, RetryPolicy):
            raise bad(f"retry must be an agentcore.RetryPolicy, not {type(self.retry).__name__}")
        if self.budget is not None and not isinstance(self.budget, Budget):
            raise bad(f"budget must be a subagent.Budget, not {type(self.budget).__name__}")
        for agent in self.delegates_to or ():
            if not isinstance(agent, str) or not agent or "/" in agent:
                raise bad(
                    f"delegates_to must list agent names (non-empty, without '/'), "
                    f"not {agent!r}"
                )


def delegated(spec: Spec, run: Run | None) -> Spec:
    """``spec`` as a task started from within ``run`` runs it. Not a checkpoint.

    Its gate becomes the composition (:func:`agentcore.nested_gate`) of ``run``'s
    effective gate (its agent's gate, named by the run's path in denials) and its
    own: delegation cannot widen permission. Unchanged without a run (a task
    submitted directly by the caller keeps its own gate) or when that run's gate
    allows all.
    """
    if run is None or run.agent.gate is None:
        return spec
    gate = nested_gate(run.agent.gate, format_path(run.path), spec.gate)
    return attrs.evolve(spec, gate=gate)
