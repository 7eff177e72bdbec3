"""The conversation a task starts from: ``Pool.submit(..., history=...)``.

:func:`check_history` checks the messages a caller hands to a submit (their types,
their order of tool calls and answers, and the pool's caps on their number and
size) and returns them as a tuple; :func:`conversation` is the part of a finished
run's messages that :attr:`subagent.Result.messages` holds, which a later submit
can take as its history. Pure functions, no I/O; nothing here is a checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

import attrs

from agentcore import Message, ToolCall

from .._errors import InvalidHistoryError

#: The default of ``open_pool(max_history_messages=...)``: messages a submit's history may hold.
MAX_HISTORY_MESSAGES = 10_000
#: The default of ``open_pool(max_history_bytes=...)``: the UTF-8 bytes of every text
#: in a submit's history (contents, tool call ids, names and arguments), 16 MiB.
MAX_HISTORY_BYTES = 16 * 2**20

# Text quoted from a history (a call id) in an error is cut to this many characters.
_QUOTED = 64
# Unanswered call ids named in an error, at most.
_LISTED = 5
_ROLES = ("user", "assistant", "tool")


def _positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"open_pool {name} must be an int of at least 1, not {value!r}")


@attrs.frozen
class HistoryLimits:
    """The caps on the history one submit may start a task from.

    Attributes:
      max_messages: The most messages.
      max_bytes: The most UTF-8 bytes of all its text: each message's content and
        ``tool_call_id``, and each tool call's id, name and arguments.

    Raises:
      ValueError: a cap that is not an int of at least 1.
    """

    max_messages: int = MAX_HISTORY_MESSAGES
    max_bytes: int = MAX_HISTORY_BYTES

    def __attrs_post_init__(self) -> None:
        _positive("max_history_messages", self.max_messages)
        _positive("max_history_bytes", self.max_bytes)


#: No caps but the defaults.
DEFAULT_LIMITS = HistoryLimits()


def conversation(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """``messages`` of a run without its system prompt (the spec's prompt and the
    subagent framing, which the pool gives every run): what ``Result.messages`` holds."""
    if messages and messages[0].role == "system":
        return messages[1:]
    return messages


def _quote(text: str) -> str:
    return repr(text) if len(text) <= _QUOTED else f"{text[:_QUOTED]!r}... ({len(text)} characters)"


def _type(value: object) -> str:
    return type(value).__name__


class _Counter:
    """The running byte count of a history, raising as soon as it passes the cap."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def add(self, text: object, where: str, index: int) -> None:
        if not isinstance(text, str):
            raise InvalidHistoryError(f"{where} must be str, not {_type(text)}", index)
        room = self.limit - self.used
        # A character is 1 to 4 bytes: text longer than the room is over without
        # encoding it; ASCII text is as many bytes as characters.
        if len(text) > room:
            self._over(index)
        if text.isascii():
            size = len(text)
        else:
            try:
                size = len(text.encode("utf-8"))
            except UnicodeEncodeError:
                raise InvalidHistoryError(
                    f"{where} is not valid text (it holds a lone surrogate)", index
                ) from None
        if size > room:
            self._over(index)
        self.used += size

    def _over(self, index: int) -> None:
        raise InvalidHistoryError(
            f"history is larger than {self.limit} bytes (max_history_bytes), "
            f"passed at history[{index}]",
            index,
        )


def _check_calls(
    message: Message, where: str, index: int, counter: _Counter
) -> dict[str, None]:
    # The ids of an assistant message's tool calls (an ordered set), each checked
    # and counted.
    calls = message.tool_calls
    if not isinstance(calls, tuple):
        raise InvalidHistoryError(f"{where}.tool_calls must be a tuple, not {_type(calls)}", index)
    ids: dict[str, None] = {}
    for number, call in enumerate(calls):
        at = f"{where}.tool_calls[{number}]"
        if not isinstance(call, ToolCall):
            raise InvalidHistoryError(
                f"{at} must be an agentcore.ToolCall, not {_type(call)}", index
            )
        counter.add(call.id, f"{at}.id", index)
        counter.add(call.name, f"{at}.name", index)
        counter.add(call.arguments, f"{at}.arguments", index)
        if call.id in ids:
            raise InvalidHistoryError(f"{at} repeats the call id {_quote(call.id)}", index)
        ids[call.id] = None
    if ids and message.role != "assistant":
        raise InvalidHistoryError(
            f"{where} has tool calls but its role is {message.role!r} "
            "(only assistant messages make tool calls)",
            index,
        )
    return ids


def _unanswered(ids: dict[str, None]) -> str:
    shown = [_quote(i) for i in islice(ids, _LISTED)]
    if len(ids) > _LISTED:
        shown.append(f"and {len(ids) - _LISTED} more")
    return ", ".join(shown)


def check_history(history: Iterable[Message], limits: HistoryLimits) -> tuple[Message, ...]:
    """``history`` as a tuple, once it is fit to start a run from. Not a checkpoint.

    Fit means: an iterable (not a string) of at most ``limits.max_messages``
    :class:`agentcore.Message` values with text fields of type ``str`` and at most
    ``limits.max_bytes`` UTF-8 bytes in all; no system message (the pool gives each
    run its spec's system prompt); tool calls only on assistant messages, with
    distinct ids; each tool message answering a call of the assistant message
    before it that no earlier tool message answered; and every call answered before
    the next user or assistant message and before the end of the history (the
    task's input follows it). The messages of a :class:`subagent.Result` are fit.
    It stops reading at the first fault, or after ``max_messages + 1`` messages.

    Raises:
      InvalidHistoryError: the first fault found, naming the message
        (``history[i]``) and the field.
    """
    if type(history) is tuple and not history:
        return ()  # the usual case: no history (a submit's fast path)
    if isinstance(history, str | bytes | bytearray) or not isinstance(history, Iterable):
        raise InvalidHistoryError(
            f"history must be an iterable of agentcore.Message, not {_type(history)}", None
        )
    items = tuple(islice(history, limits.max_messages + 1))
    if len(items) > limits.max_messages:
        raise InvalidHistoryError(
            f"history has more than {limits.max_messages} messages (max_history_messages)",
            None,
        )
    counter = _Counter(limits.max_bytes)
    open_calls: dict[str, None] = {}
    for index, message in enumerate(items):
        where = f"history[{index}]"
        if not isinstance(message, Message):
            raise InvalidHistoryError(
                f"{where} must be an agentcore.Message, not {_type(message)}", index
            )
        role = message.role
        if role == "system":
            raise InvalidHistoryError(
                f"{where} is a system message: the pool gives each run its spec's system "
                "prompt, so a history holds user, assistant and tool messages only",
                index,
            )
        if role not in _ROLES:
            raise InvalidHistoryError(
                f"{where}.role must be 'user', 'assistant' or 'tool', not {_quote(str(role))}",
                index,
            )
        counter.add(message.content, f"{where}.content", index)
        if not isinstance(message.is_error, bool):
            raise InvalidHistoryError(
                f"{where}.is_error must be bool, not {_type(message.is_error)}", index
            )
        ids = _check_calls(message, where, index, counter)
        answered = message.tool_call_id
        if role == "tool":
            if answered is None:
                raise InvalidHistoryError(
                    f"{where} is a tool message without a tool_call_id", index
                )
            counter.add(answered, f"{where}.tool_call_id", index)
            if answered not in open_calls:
                raise InvalidHistoryError(
                    f"{where} answers tool call {_quote(answered)}, which is not an "
                    "unanswered call of the assistant message before it",
                    index,
                )
            del open_calls[answered]
            continue
        if answered is not None:
            raise InvalidHistoryError(
                f"{where} has a tool_call_id but its role is {role!r} "
                "(only tool messages answer calls)",
                index,
            )
        if open_calls:
            raise InvalidHistoryError(
                f"{where} follows tool calls that were not answered: {_unanswered(open_calls)}",
                index,
            )
        open_calls = ids
    if open_calls:
        raise InvalidHistoryError(
            f"history ends with tool calls that were not answered: {_unanswered(open_calls)}",
            len(items) - 1,
        )
    return items
