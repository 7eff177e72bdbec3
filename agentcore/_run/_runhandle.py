"""RunHandle: the control requests other tasks send a run (steer, follow_up,
interrupt, abort, put) and what they may read of it. All synchronous, none a
checkpoint. :class:`agentcore.Run` inherits them; each checks, then makes one
transition of the run's :class:`RunState`.
"""

from __future__ import annotations

from typing import Protocol

import trio

from .._events import EventKind
from .._messages import Message
from .._steering import Pending, RunEndedError
from ._state import Phase, RunState


class ScopeOwner(Protocol):
    """What runs a :class:`agentcore.Run` inside a cancel scope of its own (the
    pool's task: ``Run.run(owner=task)``): the run then has no scope of its own, and
    :meth:`RunHandle.abort` cancels the owner's (a cancel scope per run fewer).

    ``_scope`` is the scope the owner has entered around ``run()``; the owner also
    cancels it (its cancel, its deadline). ``_cancelled_otherwise()`` says whether
    the owner cancelled it, or its deadline passed: a Cancelled reaching the run
    while it says False, after an abort, is the abort's. Neither is a checkpoint.
    """

    _scope: trio.CancelScope

    def _cancelled_otherwise(self) -> bool: ...


class RunHandle:
    """The control side of a :class:`agentcore.Run` (a mixin over its state)."""

    __slots__ = ()

    _state: RunState
    # The run's cancel scope while it runs (abort cancels it): its own, or its
    # owner's (see ScopeOwner) from the end of agent_start.
    _scope: trio.CancelScope | None

    def steer(self, text: str) -> None:
        """Add a user message to the running conversation. Not a checkpoint.

        The loop reads pending messages at the top of each iteration (after
        ``turn_start``, with a ``steering_injected`` event each). A pending message
        also skips the current turn's tool calls not yet started, and keeps the run
        going when the model answers without tool calls and turns remain; if the
        run ends before reading it, it comes back in ``RunResult.follow_ups``.

        Raises:
          RunEndedError: the run has ended.
        """
        self._check_open("steer")
        self.put(Pending(Message("user", text), EventKind.steering_injected, text))

    def follow_up(self, text: str) -> None:
        """Queue a message for after this run: it comes back in ``RunResult.follow_ups``
        for the caller to run next (``follow_up_queued`` event). Not a checkpoint.

        Raises:
          RunEndedError: the run has ended.
        """
        self._check_open("follow_up")
        self._state.follow_ups.append(text)

    def interrupt(self) -> None:
        """Ask the run to stop gracefully. Not a checkpoint; idempotent.

        Tool calls running now finish; the turn's other calls are skipped (each gets
        a ``skipped: interrupted`` result and a ``tool_skipped`` event); a note is
        added and the model is called once more, without tools, to summarise. The
        run ends ``interrupted`` (``interrupt_received`` when the loop notices). If
        the model has already answered without tool calls, that answer is the output.
        Does nothing once the run has ended.
        """
        if self._state.phase is not Phase.ended:
            self._state.interrupt_requested = True

    def pause(self) -> None:
        """Ask the run to pause at its next safe point, as if a gate had deferred a
        call but with nothing to answer. Not a checkpoint; idempotent.

        Tool calls running now finish, none starts after them (the turn's other
        calls stay pending, to run on resume), and the run ends ``paused`` with its
        ``RunState``; a model call in progress finishes first. If the model answers
        without tool calls, the run ends with that answer instead. Does nothing once
        the run has ended. (The pool pauses a background subagent this way when its
        parent's tree pauses.)
        """
        if self._state.phase is not Phase.ended:
            self._state.pausing = True

    @property
    def interrupt_requested(self) -> bool:
        """Whether :meth:`interrupt` was called before the run ended."""
        return self._state.interrupt_requested

    @property
    def abort_requested(self) -> bool:
        """Whether :meth:`abort` was called (by a hook, too) before the run ended."""
        return self._state.abort_reason is not None

    def abort(self, reason: str = "") -> None:
        """Stop the run now (hard). Not a checkpoint; idempotent.

        The model call, tools and hooks in progress are cancelled, the conversation
        is rolled back to its snapshot at the start of the current turn, and the
        run ends ``aborted`` (``interrupt_received`` with text ``abort: <reason>``,
        then ``agent_end``); :meth:`run` returns the result. Does nothing once the
        run has ended.
        """
        state = self._state
        if state.phase is Phase.ended or state.abort_reason is not None:
            return
        state.abort_reason = reason
        if self._scope is not None:
            self._scope.cancel()

    def put(self, pending: Pending) -> None:
        """Add ``pending`` to the inbox read at the top of the next iteration. Not a checkpoint.

        Raises:
          RunEndedError: the run has ended.
        """
        self._check_open("put")
        self._state.put(pending)

    @property
    def ended(self) -> bool:
        """Whether the run has ended or decided to end: steering is no longer accepted."""
        return self._state.phase is Phase.ended

    @property
    def has_pending(self) -> bool:
        """Whether messages that preempt tool calls (``Pending.preempts``) are waiting."""
        return self._state.preempting > 0

    def _check_open(self, what: str) -> None:
        if self._state.phase is Phase.ended:
            raise RunEndedError(
                f"cannot {what}: run {self._state.run_id} has ended; start a new run instead"
            )


def uncancelled(exc: BaseException) -> BaseException | None:
    # ``exc`` without its trio.Cancelled, as a cancel scope filters it: None when it
    # is only Cancelled, ``exc`` itself when it holds none, else what is left (one
    # exception left is unwrapped).
    if isinstance(exc, trio.Cancelled):
        return None
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    matched, rest = exc.split(trio.Cancelled)
    if matched is None:
        return exc
    if rest is not None and len(rest.exceptions) == 1:
        return rest.exceptions[0]
    return rest
