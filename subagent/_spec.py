"""Specs (what a subagent is) and the pool's Defaults they inherit from."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs

from agentcore import ChatModel, Run, Tool, ToolGate, nested_gate

from ._errors import SpecError, format_path

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
    """

    model: ChatModel | None = None
    gate: ToolGate | None = None
    audit: Sink | None = None
    agent_id: str = ""


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
        descendant's) before it is aborted; ``None`` disables the watchdog.
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
        )
        resolved._check()
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
        for field in ("timeout", "idle_timeout"):
            value = getattr(self, field)
            if value is not None and not (value > 0 and not math.isnan(value)):
                raise bad(f"{field} must be positive or None, not {value!r}")
        if self.max_children is not None and self.max_children < 1:
            raise bad(f"max_children must be at least 1, not {self.max_children!r}")
        if self.max_messages is not None and self.max_messages < 1:
            raise bad(f"max_messages must be at least 1, not {self.max_messages!r}")
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
