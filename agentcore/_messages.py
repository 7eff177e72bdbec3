"""Conversation values: messages, tool calls, usage, tool specs, model requests and responses."""

from __future__ import annotations

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


@attrs.frozen(slots=True)
class Usage:
    """Token counts of one or more model calls; ``a + b`` adds them.

    Attributes:
      input_tokens: Tokens sent to the model.
      output_tokens: Tokens the model produced.
      model: The model that was called (keyword only), or ``""`` when unknown. A
        sum keeps the model its parts name when they name at most one; a sum of
        usages of different models names :data:`MIXED_MODELS` (``"(mixed)"``).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    model: str = attrs.field(default="", kw_only=True)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            model=_sum_model(self.model, other.model),
        )


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
