"""The history a submit starts from (``subagent._specs._history.check_history``):
messages of any shape (wrong roles, forged field types, tool calls and answers in
any order, lone surrogates, long ids), with tiny caps half the time. The input is
accepted unchanged (as a tuple) or refused with ``InvalidHistoryError``, whose text
stays short (quoted ids are cut) and whose ``index`` names a message of the input."""

from __future__ import annotations

from typing import Any

from agentcore import Message, ToolCall
from subagent import InvalidHistoryError
from subagent._specs._history import DEFAULT_LIMITS, HistoryLimits, check_history

from ._bytes import ByteReader
from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (InvalidHistoryError,)

_IDS = ("a", "b", "c", "", "\ud800", "k" * 500)
_ODD: tuple[Any, ...] = (None, 1, b"x", ["a"], ("a", "t", "{}"), {"role": "user"}, 2.5)


def _id(reader: ByteReader) -> Any:
    return reader.choice(_ODD) if reader.below(8) == 0 else reader.choice(_IDS)


def _message(reader: ByteReader) -> Any:
    kind = reader.below(16)
    if kind == 0:
        return reader.choice(_ODD)
    role: Any = reader.choice(("user", "assistant", "tool", "system"))
    calls = tuple(
        ToolCall(_id(reader), reader.text(), reader.text())
        if reader.below(8)
        else reader.choice(_ODD)
        for _ in range(reader.below(4) if role == "assistant" or kind == 1 else 0)
    )
    answered = _id(reader) if role == "tool" or kind == 2 else None
    message = Message(role, reader.text(), tool_calls=calls, tool_call_id=answered)
    if kind == 3:
        # A field of the wrong type (attrs checks only the role on construction).
        field = reader.choice(("role", "content", "tool_calls", "tool_call_id", "is_error"))
        object.__setattr__(message, field, reader.choice(_ODD))
    return message


def target(data: bytes) -> None:
    reader = ByteReader(data)
    small = reader.below(2)
    limits = (
        HistoryLimits(reader.below(8) + 1, reader.below(64) + 1) if small else DEFAULT_LIMITS
    )
    history = [_message(reader) for _ in range(reader.below(10))]
    shape = reader.below(4)
    given: Any = history if shape else iter(history)
    try:
        accepted = check_history(given, limits)
    except InvalidHistoryError as error:
        assert len(str(error)) < 1_000, str(error)
        assert error.index is None or 0 <= error.index < len(history), error.index
    else:
        assert accepted == tuple(history)
        assert len(accepted) <= limits.max_messages


if __name__ == "__main__":
    main(target, ALLOWED)
