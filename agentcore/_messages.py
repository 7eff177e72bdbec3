"""Conversation values: messages, tool calls, usage, tool specs, model requests and responses."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})

#: An AgentPath: the segments naming a run from the root, e.g. ``("root/0001", "web/0002")``.
AgentPath = tuple[str, ...]


def _calls(value: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(value)


def _messages(value: Iterable[Message]) -> tuple[Message, ...]:
    return tuple(value)


def _specs(value: Iterable[ToolSpec]) -> tuple[ToolSpec, ...]:
    return tuple(value)


def _check_role(_inst: object, _attr: object, value: str) -> None:
    if value not in ROLES:
        raise ValueError(f"Message role must be one of {sorted(ROLES)}, not {value!r}")


@attrs.frozen(slots=True)
class ToolCall:
    """One tool call the model asked for.

    Attributes:
      id: The model's id for the call; the tool message answering it carries the same id.
      name: The tool's name.
      arguments: The arguments as JSON text (the model's text, not yet parsed).
    """

    id: str
    name: str
    arguments: str = "{}"


@attrs.frozen(slots=True)
class Message:
    """One message of a conversation.

    Attributes:
      role: ``system``, ``user``, ``assistant`` or ``tool``.
      content: The text.
      tool_calls: The tool calls of an assistant message.
      tool_call_id: For a tool message, the id of the call it answers.
      is_error: For a tool message, whether it reports a failure.
    """

    role: Role = attrs.field(validator=_check_role)
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_calls)
    tool_call_id: str | None = None
    is_error: bool = False


#: The ``model`` of a sum of usages of different models.
MIXED_MODELS = "(mixed)"


def _sum_model(a: str, b: str) -> str:
    # "" (no model named) is the identity and MIXED_MODELS absorbs: associative.
    if not a or a == b:
        return b
    if not b:
        return a
    return MIXED_MODELS


def _count(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Usage.{attribute.name} must be a non-negative int, not {value!r}")


def _cost(_inst: object, _attr: object, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise ValueError(f"Usage.cost must be None or a finite non-negative number, not {value!r}")


def _sum_cost(a: Usage, b: Usage) -> float | None:
    # A usage with tokens and no cost is unpriced and makes any sum unpriced; one with
    # neither (Usage()) adds nothing. Each side is "no tokens", "priced" or "unpriced",
    # and the sum is unpriced if either side is: associative, with Usage() the identity.
    if a.cost is None and b.cost is None:
        return None
    if a.cost is None:
        return b.cost if a._empty() else None
    if b.cost is None:
        return a.cost if b._empty() else None
    return a.cost + b.cost


@attrs.frozen(slots=True)
class Usage:
    """Token counts of one or more model calls, and what they cost; ``a + b`` adds them.

    Attributes:
      input_tokens: Tokens sent to the model, cache reads and writes included.
      output_tokens: Tokens the model produced.
      cache_read_tokens: The part of ``input_tokens`` read from the provider's prompt
        cache (keyword only; 0 when the provider reports none).
      cache_write_tokens: The part of ``input_tokens`` written to the provider's prompt
        cache (keyword only; only some providers report it).
      model: The model that was called (keyword only), or ``""`` when unknown. A
        sum keeps the model its parts name when they name at most one; a sum of
        usages of different models names :data:`MIXED_MODELS` (``"(mixed)"``).
      cost: What the calls cost in US dollars (keyword only), or None when no price
        is known (see :func:`agentcore.models.price`). A sum's cost is the sum of its
        parts' costs, and None as soon as one part has tokens but no cost: an
        unpriced call is never counted as free. A part with no tokens and no cost
        (such as ``Usage()``) adds nothing. Costs are floats: sums in another order
        may differ in the last bits.

    Raises:
      ValueError: a negative count, cache tokens that add up to more than
        ``input_tokens``, or a cost that is negative or not finite.
    """

    input_tokens: int = attrs.field(default=0, validator=_count)
    output_tokens: int = attrs.field(default=0, validator=_count)
    cache_read_tokens: int = attrs.field(default=0, kw_only=True, validator=_count)
    cache_write_tokens: int = attrs.field(default=0, kw_only=True, validator=_count)
    model: str = attrs.field(default="", kw_only=True)
    cost: float | None = attrs.field(default=None, kw_only=True, validator=_cost)

    def __attrs_post_init__(self) -> None:
        if self.cache_read_tokens + self.cache_write_tokens > self.input_tokens:
            raise ValueError(
                "Usage's cache_read_tokens and cache_write_tokens are parts of its "
                f"input_tokens, so cannot add up to more ({self.cache_read_tokens} + "
                f"{self.cache_write_tokens} > {self.input_tokens})"
            )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def _empty(self) -> bool:
        # Cache tokens are parts of input_tokens: no need to look at them.
        return self.input_tokens == 0 and self.output_tokens == 0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        cost = _sum_cost(self, other)
        if cost is not None and not cost < math.inf:
            # Costs whose sum overflows: refused by the constructor, as the sum of
            # two usages always was.
            return Usage(
                self.input_tokens + other.input_tokens,
                self.output_tokens + other.output_tokens,
                cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
                cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
                model=_sum_model(self.model, other.model),
                cost=cost,
            )
        # Sums of valid usages are valid (non-negative int counts, cache parts within
        # the input, a finite non-negative cost): built by slot stores, without the
        # validators (a run adds one per model call).
        total: Any = _new(_OpenUsage)  # a Usage once its class is set below
        total.input_tokens = self.input_tokens + other.input_tokens
        total.output_tokens = self.output_tokens + other.output_tokens
        total.cache_read_tokens = self.cache_read_tokens + other.cache_read_tokens
        total.cache_write_tokens = self.cache_write_tokens + other.cache_write_tokens
        total.model = _sum_model(self.model, other.model)
        total.cost = cost
        total.__class__ = Usage
        return total  # type: ignore[no-any-return]


class _OpenUsage(Usage):
    # A Usage under construction (Usage.__add__): the same slots, set by plain stores,
    # then turned into a Usage by __class__ assignment (as agentcore._events._Open).
    __slots__ = ()
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__


_new = object.__new__


@attrs.frozen(slots=True)
class ToolSpec:
    """What the model is told about a tool: its name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@attrs.frozen(slots=True)
class ModelRequest:
    """One model call's input: the conversation so far and the tools offered."""

    messages: tuple[Message, ...] = attrs.field(converter=_messages)
    tools: tuple[ToolSpec, ...] = attrs.field(default=(), converter=_specs)


@attrs.frozen(slots=True)
class ModelResponse:
    """One model call's output.

    Attributes:
      message: The assistant message (text and/or tool calls).
      finish_reason: Why the model stopped: ``stop``, ``tool_calls``, ``length``, ...
      usage: Tokens this call used.
    """

    message: Message
    finish_reason: str = "stop"
    usage: Usage = Usage()
