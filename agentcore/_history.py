"""The history budget: measuring a conversation and dropping its oldest messages.

Pure functions, no I/O: the loop calls them before each model call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._messages import Message

#: Measures one message in the unit of a history limit (characters, tokens, ...).
MessageCounter = Callable[[Message], int]


def count_chars(message: Message) -> int:
    """The characters of a message's content and of its tool calls' names and arguments."""
    size = len(message.content)
    for call in message.tool_calls:
        size += len(call.name) + len(call.arguments)
    return size


def estimate_tokens(message: Message) -> int:
    """A rough token count: a quarter of :func:`count_chars`, rounded up, plus 4 per message."""
    return 4 + (count_chars(message) + 3) // 4


def _blocks(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """The droppable units, oldest first, as ``(start, stop)`` index ranges.

    System messages are never droppable; an assistant message with tool calls and
    the tool messages answering it form one unit.
    """
    blocks: list[tuple[int, int]] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        if message.role == "system":
            i += 1
            continue
        stop = i + 1
        if message.role == "assistant" and message.tool_calls:
            while stop < n and messages[stop].role == "tool":
                stop += 1
        blocks.append((i, stop))
        i = stop
    return blocks


def _without(messages: Sequence[Message], dropped: list[tuple[int, int]]) -> list[Message]:
    gone = {i for start, stop in dropped for i in range(start, stop)}
    return [m for i, m in enumerate(messages) if i not in gone]


def fit(
    messages: Sequence[Message],
    *,
    max_messages: int | None,
    limit: int | None,
    counter: MessageCounter,
) -> list[Message] | None:
    """Drop the oldest non-system messages until the history is within both bounds.

    Args:
      messages: The conversation.
      max_messages: At most this many messages (system messages included), or None.
      limit: At most this total of ``counter`` over the messages, or None.
      counter: Measures one message for ``limit``.

    Returns:
      The shortened conversation, or None when it is within bounds already. The
      newest unit (see :func:`_blocks`) is always kept, so the result may still
      exceed a bound: the limit is soft.
    """
    count = len(messages)
    size = sum(counter(m) for m in messages) if limit is not None else 0

    def over() -> bool:
        return (max_messages is not None and count > max_messages) or (
            limit is not None and size > limit
        )

    if not over():
        return None
    blocks = _blocks(messages)
    dropped: list[tuple[int, int]] = []
    for start, stop in blocks[:-1]:
        if not over():
            break
        dropped.append((start, stop))
        count -= stop - start
        if limit is not None:
            size -= sum(counter(m) for m in messages[start:stop])
    if not dropped:
        return None
    return _without(messages, dropped)


def drop_oldest_half(messages: Sequence[Message]) -> list[Message] | None:
    """Drop the oldest half (rounded up to whole units) of the non-system messages.

    The newest unit is always kept. Returns None when nothing can be dropped.
    """
    blocks = _blocks(messages)
    target = sum(stop - start for start, stop in blocks) // 2
    dropped: list[tuple[int, int]] = []
    removed = 0
    for start, stop in blocks[:-1]:
        if dropped and removed >= target:
            break
        dropped.append((start, stop))
        removed += stop - start
    if not dropped:
        return None
    return _without(messages, dropped)
