"""The mutable state of one run, in one value: :class:`RunState` (owned by its Run).

Everything a run changes while it runs lives here (the conversation, the counters,
the usage, what waits in its inbox, the control flags, how it ended), so the run is
one value that can later be saved and resumed. The live machinery (the cancel
scope, the event destination, the agent) stays on the :class:`Run`, which is the
only writer: the helpers of a turn see the state through ``RunPort``.
No I/O here; the methods are the transitions whose rules span several fields.
"""

from __future__ import annotations

import enum

import attrs

from ._messages import Message, Usage
from ._steering import Pending
from ._summary import RunSummary


class Phase(enum.Enum):
    """Where a run is in its life: a run goes new -> running -> ended, once."""

    new = "new"
    running = "running"
    ended = "ended"
    """Ended, or decided to end: no more steering is accepted."""


@attrs.define(eq=False)
class RunState:
    """The mutable state of one run; see the module docstring. Not thread-safe, like
    everything of a trio run: it is changed from the run's tasks and its handle's
    sync methods, never across a checkpoint halfway."""

    messages: list[Message]
    """The conversation, system prompt first; the run's live list."""
    snapshot: tuple[Message, ...]
    """The conversation at the start of the current turn (what an abort rolls back to)."""
    phase: Phase = Phase.new
    turn: int = 0
    """Turns started (a graceful interrupt's summarising call is one too)."""
    tool_calls: int = 0
    tool_errors: int = 0
    denied: int = 0
    usage: Usage = Usage()
    inbox: list[Pending] = attrs.Factory(list)
    """Messages waiting for the top of the next iteration; empty once ended."""
    preempting: int = 0
    """How many of ``inbox`` preempt tool calls (``Pending.preempts``)."""
    follow_ups: list[str] = attrs.Factory(list)
    """Texts for the caller to run next, in the order received."""
    reported: int = 0
    """How many of ``follow_ups`` were announced with ``follow_up_queued`` (a prefix)."""
    interrupt_requested: bool = False
    interrupt_noted: bool = False
    """Whether ``interrupt_received`` was emitted for the graceful interrupt."""
    abort_reason: str | None = None
    """Why the run was aborted (hard); None while it was not."""
    start_delivered: bool = False
    """Whether the destination took ``agent_start`` (the end is only emitted then)."""
    summary: RunSummary | None = None
    """How the run ended, once it has."""

    @classmethod
    def begin(cls, messages: list[Message]) -> RunState:
        """The state of a run that has not started, on the conversation ``messages``."""
        return cls(messages, tuple(messages))

    def put(self, pending: Pending) -> None:
        """Add ``pending`` to the inbox (the caller checked the run has not ended)."""
        assert self.phase is not Phase.ended
        self.inbox.append(pending)
        if pending.preempts:
            self.preempting += 1

    def read_inbox(self) -> list[Pending]:
        """Move the waiting messages into the conversation; returns them, in order."""
        injected = self.inbox
        if injected:
            self.inbox = []
            self.preempting = 0
            self.messages.extend(p.message for p in injected)
        return injected

    def begin_turn(self) -> None:
        """Count a new turn; an abort from here on rolls back to this point."""
        self.turn += 1
        self.snapshot = tuple(self.messages)

    def roll_back(self) -> None:
        """Put the conversation back as it was at the start of the current turn."""
        self.messages[:] = self.snapshot

    def close(self) -> None:
        """End the run's acceptance of messages (idempotent): unread steering
        becomes follow-ups."""
        if self.phase is Phase.ended:
            return
        self.phase = Phase.ended
        self.follow_ups.extend(p.follow_up for p in self.inbox if p.follow_up is not None)
        self.inbox.clear()
        self.preempting = 0
