"""The mutable state of one run, in one value: :class:`RunState` (owned by its Run).

Everything a run changes while it runs lives here (the conversation, the counters,
the usage, what waits in its inbox, the control flags, how it ended), so the run is
one value that can later be saved and resumed. The live machinery (the cancel
scope, the event destination, the agent) stays on the :class:`Run`, which is the
only writer: the helpers of a turn see the state through ``RunPort``.
No I/O here; the methods are the transitions whose rules span several fields.

It is also the public value of a run that paused (``agentcore.RunState``): a
gate deferred a call, the run ended ``paused``, and ``RunResult.state`` holds this
value. Then a human answers its :attr:`pending_approvals` with :meth:`approve` and
:meth:`deny`, it may be stored with :meth:`to_json` and read back (in another
process) with :meth:`from_json`, and :meth:`Agent.resume` continues it. Between the
end of one run and its resume, the human's answers are its only writes.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence

import attrs

from .._errors import RunStateError
from .._events import EventKind
from .._messages import AgentPath, Message, Usage
from .._spent import Spent
from .._steering import InboxMessage
from .._summary import EndReason, RunSummary
from ._codec import Decoded, decode_state, encode_state
from ._pending import BackgroundChild, CallStatus, PendingApproval, PendingCall

#: How many pending ids an error about an unknown call id lists.
_LISTED = 20


def _quoted(call_id: str) -> str:
    # An id from a state read from outside: quoted, and cut when long.
    if len(call_id) <= 200:
        return repr(call_id)
    return f"{call_id[:200]!r}... ({len(call_id)} characters)"


class Phase(enum.Enum):
    """Where a run is in its life: a run goes new -> running -> ended, once."""

    new = "new"
    running = "running"
    ended = "ended"
    """Ended, or decided to end: no more steering is accepted."""


# Read once for close(), on every run's way out: an enum member read goes through
# EnumType.__getattr__ (about 200 ns on Python 3.11).
_ENDED = Phase.ended


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
    # The four lists below are created when first used (see the properties of the
    # same names): most runs never use them, and a parked run holds its state.
    _inbox: list[InboxMessage] | None = None
    _follow_ups: list[str] | None = None
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
    run_id: str = ""
    """The id the run's events and audit entries carry (kept on resume)."""
    agent: str = ""
    """The agent's id (its name in a pool): resume checks it is the same agent."""
    path: AgentPath = ()
    """The run's AgentPath."""
    input: str = ""
    """The user message the run started on."""
    _pending: list[PendingCall] | None = None
    elapsed: float = 0.0
    """Seconds (trio's clock) the run ran before its current start: durations add up
    across pauses."""
    _children: list[RunState] | None = None
    background: BackgroundChild | None = None
    """Set on a child state that is a background child of its parent run, not yet
    delivered (see :class:`BackgroundChild`); None on every other state."""
    pausing: bool = False
    """Whether a gate deferred a call in the current turn (the run is pausing)."""
    checkpoint: str = ""
    """The name of the checkpoint a crashed run was recovered from, until its resume
    records it in the ``run_resumed`` audit entry (not stored by ``to_json``)."""
    nonce: str = ""
    """128 random bits (32 hex digits) made when the run's first tool call starts,
    stored by ``to_json``: with the run id and a call id, it makes the call's
    idempotency key (``current_tool_call().idempotency_key``); empty until then."""
    spent: dict[str, Spent] = attrs.field(factory=dict)
    """What the budgets over the run had spent, by budget name (see :class:`Spent`;
    written by ``subagent``, stored by ``to_json``; empty in a state stored before it
    existed, which reads as nothing spent)."""

    @property
    def inbox(self) -> list[InboxMessage]:
        """Messages waiting for the top of the next iteration; empty once ended."""
        if self._inbox is None:
            self._inbox = []
        return self._inbox

    @inbox.setter
    def inbox(self, value: list[InboxMessage]) -> None:
        self._inbox = value

    @property
    def follow_ups(self) -> list[str]:
        """Texts for the caller to run next, in the order received."""
        if self._follow_ups is None:
            self._follow_ups = []
        return self._follow_ups

    @follow_ups.setter
    def follow_ups(self, value: list[str]) -> None:
        self._follow_ups = value

    @property
    def pending(self) -> list[PendingCall]:
        """The calls of the paused turn without a result message yet, in call order."""
        if self._pending is None:
            self._pending = []
        return self._pending

    @pending.setter
    def pending(self, value: list[PendingCall]) -> None:
        self._pending = value

    def drop_calls(self) -> None:
        """Forget the paused turn's calls and the children's states (a run that ended
        without pausing): ``pending`` and ``children`` read empty. Not a checkpoint."""
        self._pending = None
        self._children = None

    @property
    def children(self) -> list[RunState]:
        """The states of the runs this run's delegated calls left paused: one per
        ``delegated`` pending call, in the same order (see ``CallPaused``); then those
        of its background children not yet delivered (each marked ``background``)."""
        if self._children is None:
            self._children = []
        return self._children

    @children.setter
    def children(self, value: list[RunState]) -> None:
        self._children = value

    @property
    def preempting(self) -> int:
        """How many of ``inbox`` preempt tool calls (``InboxMessage.preempts``): counted
        when asked (a field fewer in every run's state). Not a checkpoint."""
        inbox = self._inbox
        return sum(1 for p in inbox if p.preempts) if inbox else 0

    @property
    def has_inbox(self) -> bool:
        """Whether messages wait in the inbox (without creating it). Not a checkpoint."""
        return bool(self._inbox)

    @property
    def unreported(self) -> bool:
        """Whether follow-ups wait to be announced with ``follow_up_queued`` (without
        creating the list). Not a checkpoint."""
        return self._follow_ups is not None and self.reported < len(self._follow_ups)

    @classmethod
    def begin(
        cls,
        messages: list[Message],
        *,
        run_id: str = "",
        agent: str = "",
        path: AgentPath = (),
        input: str = "",
    ) -> RunState:
        """The state of a run that has not started, on the conversation ``messages``."""
        return cls(messages, tuple(messages), run_id=run_id, agent=agent, path=path,
                   input=input)

    def reopen(self) -> None:
        """Make a paused state the state of a run about to resume it (the run's
        counters, conversation and pending calls are kept)."""
        assert self.paused
        self.phase = Phase.new
        self.summary = None
        self.snapshot = tuple(self.messages)
        self.interrupt_requested = self.interrupt_noted = False
        self.abort_reason = None
        self.start_delivered = False
        self.pausing = False

    # -- the paused run's public face -----------------------------------------------------

    @property
    def paused(self) -> bool:
        """Whether the run ended ``paused`` (and may be resumed)."""
        return self.summary is not None and self.summary.end_reason is EndReason.paused

    @property
    def pending_approvals(self) -> tuple[PendingApproval, ...]:
        """Each deferred call still waiting for an answer, here and in the children
        (depth first, in call order). Not a checkpoint."""
        return tuple(
            PendingApproval(state.path, p.call.id, p.call.name, p.call.arguments, p.reason)
            for state in self._tree()
            for p in state.pending
            if p.status is CallStatus.deferred
        )

    def approve(
        self, call_id: str, *, reason: str = "approved", by: str = "",
        path: AgentPath | None = None,
    ) -> None:
        """Record a human's approval of the deferred call ``call_id``: it runs on resume.

        Args:
          call_id: The call's id (``PendingApproval.call_id``).
          reason: Why (the ``gate_decision`` reason the run records).
          by: Who answered, recorded in the ledger as given.
          path: The AgentPath of the run that made the call, when ids repeat in a tree.

        An answered call may be answered again until the state is resumed.

        Raises:
          RunStateError: the state is not paused, or no deferred call has this id
            (or several have and ``path`` is not given).
        """
        self._answer(call_id, CallStatus.approved, reason, by, path)

    def deny(
        self, call_id: str, reason: str, *, by: str = "", path: AgentPath | None = None
    ) -> None:
        """Record a human's denial of the deferred call ``call_id``: on resume it gets
        the error result ``denied: <reason>``. Arguments and errors as :meth:`approve`."""
        self._answer(call_id, CallStatus.denied, reason, by, path)

    def _answer(
        self, call_id: str, status: CallStatus, reason: str, by: str, path: AgentPath | None
    ) -> None:
        if not self.paused:
            raise RunStateError("this RunState is not paused: it has no call to answer")
        answerable = (CallStatus.deferred, CallStatus.approved, CallStatus.denied)
        found = [
            (state, k)
            for state in self._tree()
            if path is None or state.path == tuple(path)
            for k, p in enumerate(state.pending)
            if p.call.id == call_id and p.status in answerable
        ]
        if not found:
            ids = [a.call_id for a in self.pending_approvals]
            listed = ", ".join(_quoted(i) for i in ids[:_LISTED]) or "none"
            more = f" and {len(ids) - _LISTED} more" if len(ids) > _LISTED else ""
            where = "" if path is None else f" in run {'/'.join(path)[:200]!r}"
            raise RunStateError(
                f"no deferred call with id {call_id[:200]!r}{where}; waiting for an answer: "
                f"{listed}{more}"
            )
        if len(found) > 1:
            raise RunStateError(
                f"{len(found)} deferred calls have id {call_id[:200]!r}: "
                "give the path of the run that made it"
            )
        state, k = found[0]
        state.pending[k] = attrs.evolve(state.pending[k], status=status, reason=reason, by=by)

    def _tree(self) -> Iterator[RunState]:
        # This state, then its children's, depth first (no recursion).
        stack = [self]
        while stack:
            state = stack.pop()
            yield state
            stack.extend(reversed(state.children))

    def to_json(self) -> str:
        """This state as JSON text: a format name, its version, a SHA-256 digest of
        the state and the state. Not a checkpoint.

        Tools, models, gates, hooks and sinks are not in it: they are the Agent's,
        bound again by name on resume. Nor are the interrupt and abort flags: only
        a run that is not running (new, paused or ended) can be stored. Steering
        messages waiting in the inbox are (a snapshot taken at a checkpoint of a
        running run may hold some; at most ``MAX_STATE_STEERING``).

        Raises:
          RunStateError: the run is running, or more than ``MAX_STATE_STEERING``
            steering messages wait.
        """
        if any(state.phase is Phase.running for state in self._tree()):
            raise RunStateError(
                "a running run's state cannot be stored: store it once it has paused or ended"
            )
        return encode_state(self)

    @classmethod
    def from_json(cls, text: str | bytes, *, max_bytes: int | None = None) -> RunState:
        """Read a state written by :meth:`to_json`. Not a checkpoint.

        ``text`` is hostile input: it is refused past ``max_bytes`` (default
        ``MAX_STATE_BYTES``, 64 MiB) and past ``MAX_STATE_DEPTH`` levels of nested
        children (32), before it is decoded.

        Raises:
          RunStateError: too large or too deep, not JSON, not a RunState, written by
            an unknown version, or changed since it was written (its digest).
        """
        decoded = decode_state(text, max_bytes)
        root = cls._of(decoded)
        level = [(root, decoded)]
        while level:
            deeper = []
            for state, value in level:
                for kid in value.children:
                    child = cls._of(kid)
                    state.children.append(child)
                    deeper.append((child, kid))
            level = deeper
        return root

    @classmethod
    def _of(cls, d: Decoded) -> RunState:
        state = cls.begin(list(d.messages), run_id=d.run_id, agent=d.agent, path=d.path,
                          input=d.input)
        state.phase = Phase.new if d.summary is None else Phase.ended
        state.turn = d.turn
        state.tool_calls = d.tool_calls
        state.tool_errors = d.tool_errors
        state.denied = d.denied
        state.usage = d.usage
        state.follow_ups = list(d.follow_ups)
        state.reported = d.reported
        state.summary = d.summary
        state.pending = list(d.pending)
        state.elapsed = d.elapsed
        # Steering that waited in the inbox at a checkpoint: read by the resumed run.
        state.inbox = [InboxMessage(Message("user", t), EventKind.steering_injected, t)
                       for t in d.steering]
        state.background = d.background
        state.spent = dict(d.spent)
        state.nonce = d.nonce
        return state

    @property
    def steering(self) -> list[str]:
        """The texts of the steering messages waiting in the inbox, in order: what
        :meth:`to_json` stores of it (a checkpoint of a running run may hold some;
        other kinds of inbox entries are not stored). Not a checkpoint."""
        return [p.message.content for p in self._inbox or ()
                if p.event is EventKind.steering_injected and p.on_read is None]

    def put(self, pending: InboxMessage) -> None:
        """Add ``pending`` to the inbox (the caller checked the run has not ended)."""
        assert self.phase is not Phase.ended
        if self._inbox is None:
            self._inbox = [pending]
        else:
            self._inbox.append(pending)

    def read_inbox(self) -> Sequence[InboxMessage]:
        """Move the waiting messages into the conversation; returns them, in order
        (an empty tuple when none waited: no list is created for an empty inbox)."""
        injected = self._inbox
        if not injected:
            return ()
        self._inbox = None
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
        if self.phase is _ENDED:
            return
        self.phase = _ENDED
        if self._inbox:
            self.follow_ups.extend(p.follow_up for p in self._inbox if p.follow_up is not None)
            self._inbox = None
