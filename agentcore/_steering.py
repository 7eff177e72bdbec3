"""Steering values: messages waiting for a run, and the texts the loop adds."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from ._errors import AgentCoreError
from ._events import EventKind
from ._messages import Message

#: The note added to the conversation before the summarising call of a graceful interrupt.
INTERRUPT_NOTE = (
    "The user interrupted this run. Do not call tools. Summarise briefly what you "
    "did and found so far, and give your best answer now."
)

#: The prompt added after a response cut off by its length limit.
LENGTH_RECOVERY = (
    "Your previous answer was cut off because it was too long. Give a shorter, "
    "complete answer."
)

#: Result texts of tool calls that did not run.
SKIPPED_INTERRUPTED = "skipped: interrupted"
SKIPPED_STEERED = "skipped: the user sent a new message"


class RunEndedError(AgentCoreError):
    """A message was sent to a run that has already ended (or is ending).

    Start a new run with it instead, e.g. with the ended run's messages as history.
    """


@attrs.frozen(slots=True)
class InboxMessage:
    """A message waiting in a run's inbox, read at the top of the run's next iteration.

    Attributes:
      message: What is appended to the conversation.
      event: The event kind emitted (with ``message``) when it is appended; None
        for no agentcore event.
      follow_up: The text to return as a follow-up if the run ends before reading
        it; None drops it.
      on_read: Awaited by the loop right after the message is appended (after its
        event), in the run's task; e.g. to report a delivery.
      preempts: Whether it skips the turn's tool calls not yet started (steering
        does; a background result does not).
    """

    message: Message
    event: EventKind | None
    follow_up: str | None = None
    on_read: Callable[[], Awaitable[None]] | None = None
    preempts: bool = True
