"""Checkpoints of a running run, and the state a crashed run is recovered from.

An Agent built with ``checkpoint=`` (a :data:`Checkpointer`) hands it a
:class:`Checkpoint` at three kinds of moment, awaiting it each time so that what
it stores is durable before the run goes on:

- ``start`` is not the Agent's: whoever starts a run may take it before the run
  exists (:func:`start_checkpoint`; a pool with checkpoints does, when a task is
  queued), so a run killed before its first turn is restarted from its input;
- ``turn``: at every turn boundary, after the tool results are appended and before
  the next model call;
- ``call``: just before a call of a tool that is not read-only executes (the call is
  *in flight*: started, no result yet), so a crash between its start and its result
  is detectable;
- ``paused`` / ``ended``: once the run has ended, with its final state.

The state of a ``turn`` or ``call`` checkpoint is a snapshot in the form of a paused
run: its conversation, counters and usage, and the calls of the current turn that
have no result message yet as ``waiting`` pending calls (the in-flight one first).
:func:`recover_calls` turns such a snapshot into a state ``Agent.resume`` continues:
a call that finished is in the conversation and is never run again; the call in
flight is run again only if its tool is read-only or idempotent, or continued if it
delegated to a run that has its own checkpoint; otherwise it gets the error result
:data:`INTERRUPTED` and the model decides. No cost when no checkpointer is set.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Container, Mapping, Sequence

import attrs
import trio

from .._messages import AgentPath, Message, ToolCall
from .._summary import EndReason, RunSummary
from ._pending import CallStatus, PendingCall
from ._state import Phase, RunState

#: The error result of a call that was in flight at a crash and is not repeated.
INTERRUPTED = "interrupted by a crash; not repeated"


class CheckpointKind(enum.StrEnum):
    """When a :class:`Checkpoint` was taken."""

    start = "start"
    """Before the run's first turn: its conversation is its opening (system prompt,
    history, input); taken by whoever starts it (:func:`start_checkpoint`)."""
    turn = "turn"
    """At a turn boundary: every call so far has its result in the conversation."""
    call = "call"
    """Just before a call of a tool that is not read-only executes (``in_flight``)."""
    paused = "paused"
    """The run ended ``paused``: ``state`` is the run's paused state."""
    ended = "ended"
    """The run ended otherwise: it is not to be recovered."""


@attrs.frozen
class Checkpoint:
    """One moment of a run handed to its :data:`Checkpointer`.

    Attributes:
      kind: When it was taken.
      state: For ``turn`` and ``call``, a snapshot of the run's state in the form of
        a paused run (a copy: the run does not change it afterwards); for
        ``paused`` and ``ended``, the run's own final state (read it before the
        checkpointer returns, do not keep it).
      in_flight: The id of the call about to execute (``call`` only).
    """

    kind: CheckpointKind
    state: RunState
    in_flight: tuple[str, ...] = ()


#: What ``Agent(checkpoint=...)`` takes: awaited at each :class:`Checkpoint`; what it
#: raises ends the run ``error`` (at a turn boundary or before a call) or propagates
#: from ``Run.run`` (at the end).
Checkpointer = Callable[[Checkpoint], Awaitable[None]]


def opening(
    system_prompt: str | Message, history: Sequence[Message], input: str
) -> list[Message]:
    """The conversation a run starts on: the system prompt (if any; given as its
    message, that message itself: see ``Agent.system_message``), ``history``, then
    ``input`` as the user message. Not a checkpoint."""
    user = Message("user", input)
    system = (
        system_prompt if not isinstance(system_prompt, str)
        else Message("system", system_prompt) if system_prompt else None
    )
    if not history:
        # The common opening, as a list with no room to grow yet (every parked run
        # holds it).
        return [user] if system is None else [system, user]
    messages = [] if system is None else [system]
    messages.extend(history)
    messages.append(user)
    return messages


def start_checkpoint(
    system_prompt: str, input: str, *, run_id: str, agent: str, path: AgentPath,
    history: Sequence[Message] = (),
) -> Checkpoint:
    """The ``start`` checkpoint of a run not started yet: its opening conversation in
    the form of a paused run with no pending call, which ``Agent.resume`` restarts
    from its input (recording its prompt again). Not a checkpoint (trio); O(history)."""
    state = RunState.begin(opening(system_prompt, history, input), run_id=run_id,
                           agent=agent, path=path, input=input)
    return Checkpoint(CheckpointKind.start, snapshot(state))


def snapshot(state: RunState) -> RunState:
    """A copy of a running run's ``state`` in the form of a paused run, with the
    current turn's calls that have no result message as ``waiting`` pending calls.
    Not a checkpoint; O(length of the conversation)."""
    messages = list(state.messages)
    copy = RunState.begin(messages, run_id=state.run_id, agent=state.agent,
                          path=state.path, input=state.input)
    copy.phase = Phase.ended
    copy.turn = state.turn
    copy.tool_calls = state.tool_calls
    copy.tool_errors = state.tool_errors
    copy.denied = state.denied
    copy.usage = state.usage
    copy.follow_ups = list(state.follow_ups)
    if state.has_inbox:
        copy.inbox = list(state.inbox)  # its steering is stored (InboxMessage values are frozen)
    copy.reported = state.reported
    copy.elapsed = state.elapsed
    copy.nonce = state.nonce
    copy.pending = [PendingCall(c, CallStatus.waiting) for c in unanswered(messages)]
    copy.summary = RunSummary(
        turns=state.turn, tool_calls=state.tool_calls, tool_errors=state.tool_errors,
        denied=state.denied, usage=state.usage, end_reason=EndReason.paused, error=None,
        duration=state.elapsed,
    )
    return copy


def unanswered(messages: Sequence[Message]) -> list[ToolCall]:
    """The tool calls of the last assistant message that have no result after it."""
    for k in range(len(messages) - 1, -1, -1):
        message = messages[k]
        if message.role == "assistant":
            answered = {m.tool_call_id for m in messages[k + 1:]}
            return [c for c in message.tool_calls if c.id not in answered]
    return []


async def at_turn(state: RunState, checkpoint: Checkpointer) -> None:
    """Hand a ``turn`` checkpoint of the running run's ``state`` to ``checkpoint``.
    A checkpoint (trio)."""
    await checkpoint(Checkpoint(CheckpointKind.turn, snapshot(state)))


async def before_call(state: RunState, checkpoint: Checkpointer, call: ToolCall) -> None:
    """Hand a ``call`` checkpoint (``call`` in flight) to ``checkpoint``. A checkpoint."""
    await checkpoint(Checkpoint(CheckpointKind.call, snapshot(state), (call.id,)))


async def at_end(state: RunState, checkpoint: Checkpointer, bound: float) -> None:
    """Hand the ended run's final state to ``checkpoint``, shielded for at most
    ``bound`` seconds (the run may end by being cancelled: that is an end too,
    unlike a crash). A checkpoint."""
    kind = CheckpointKind.paused if state.paused else CheckpointKind.ended
    with trio.move_on_after(bound, shield=True):
        await checkpoint(Checkpoint(kind, state))


def recover_calls(
    state: RunState,
    in_flight: Container[str],
    repeatable: Container[str],
    children: Mapping[str, RunState],
    checkpoint: str,
    again: Container[str] = (),
) -> None:
    """Make the snapshot ``state`` of a crashed run resumable, in place. Not a checkpoint.

    Args:
      state: A ``turn`` or ``call`` checkpoint's state (read back with ``from_json``).
      in_flight: The ids of the calls that were in flight at the crash.
      repeatable: The names of the tools whose calls may run again (read-only or
        idempotent).
      children: For a call in flight that started a run with its own checkpoint,
        that run's recovered state (by call id): the call's tool continues it.
      checkpoint: The name of the checkpoint, for the ``run_resumed`` audit entry.
      again: The ids of calls in flight that run again whatever their tool (a
        delegation whose subagent never stored a checkpoint: it never started).
    """
    pending: list[PendingCall] = []
    kids: list[RunState] = []
    # A paused state stored as a checkpoint (an answered state being resumed) keeps
    # its delegated calls' children, in order, and any other children after them.
    kept = iter(state.children)
    for p in state.pending:
        if p.status is CallStatus.delegated:
            pending.append(p)
            kids.append(next(kept))
        elif p.status is CallStatus.waiting and p.call.id in in_flight:
            child = children.get(p.call.id)
            if child is not None:
                pending.append(PendingCall(p.call, CallStatus.delegated, "recovered"))
                kids.append(child)
            elif p.call.name in repeatable or p.call.id in again:
                pending.append(p)
            else:
                pending.append(PendingCall(p.call, CallStatus.done, result=INTERRUPTED,
                                           is_error=True))
        else:
            pending.append(p)
    state.pending = pending
    state.children = [*kids, *kept]
    state.checkpoint = checkpoint
