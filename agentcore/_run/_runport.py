"""RunPortMethods: the :class:`~agentcore._run._port.RunPort` side of a :class:`Run` (a mixin).

The events, audit entries, messages and counters the helpers of a run's turns
(model call, tool calls, hooks, its end) go through. :class:`agentcore.Run`
inherits them; they read and write the run's ``RunState``, the one value the run
owns. Apart from ``_run`` so that the turn loop and the port stay short modules.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import trio

from .._audit import cancelled, failed, record, record_fields_sync
from .._events import EventKind, EventSink, event_of, taken_now
from .._fastpath import fields_nowait_of
from ._hookcall import call_hook

if TYPE_CHECKING:
    from ledger import Record, Sink
    from ledger._entry import Scalar

    from .._hookset import HookSet
    from .._messages import Message, ToolCall, Usage
    from .._summary import RunSummary
    from .._tools._gate import GateDecision
    from .._tools._tools import ToolOutcome
    from ._pending import PendingCall
    from ._state import RunState


class _PortAgent(Protocol):
    # What these methods read of the Agent (over what every helper reads).
    @property
    def agent_id(self) -> str: ...
    @property
    def audit(self) -> Sink | None: ...
    @property
    def hookset(self) -> HookSet: ...


class RunPortMethods:
    """The RunPort methods of a :class:`agentcore.Run` (a mixin over its state)."""

    __slots__ = ()

    agent: _PortAgent
    _state: RunState
    _emit_to: EventSink | None

    async def emit(self, kind: EventKind, **fields: Any) -> None:
        """Send one event of this run to its destination, then to its observer hooks.

        A checkpoint when there is either.
        """
        observers = self.agent.hookset.on_event
        if self._emit_to is None and not observers:
            return
        state = self._state
        event = event_of(kind, state.run_id, self.agent.agent_id, state.turn, **fields)
        if self._emit_to is not None and not taken_now(self._emit_to, event):
            await self._emit_to(event)
        for hook in observers:
            await call_hook(self, hook, event)  # type: ignore[arg-type]

    # emit_now takes the event's fields as named parameters, not as **fields: a dict
    # built and unpacked again into event_of for each of a run's events.
    def emit_now(
        self, kind: EventKind, *, text: str = "", message: Message | None = None,
        call: ToolCall | None = None, decision: GateDecision | None = None,
        is_error: bool = False, usage: Usage | None = None, summary: RunSummary | None = None,
        attempt: int = 0,
    ) -> bool:
        """Send one event of this run now, if that needs no await: no observer hooks,
        and a destination that takes it synchronously (:func:`taken_now`). Not a
        checkpoint. True when sent (or there is nowhere to send it); False, having
        sent nothing, when the caller must await :meth:`emit` instead."""
        if self.agent.hookset.on_event:
            return False
        sink = self._emit_to
        if sink is None:
            return True
        # taken_now inline (a call fewer per event), and no Event for a sink without
        # emit_nowait.
        nowait = getattr(sink, "emit_nowait", None)
        if nowait is None:
            return False
        state = self._state
        return nowait(event_of(
            kind, state.run_id, self.agent.agent_id, state.turn, text, message, call,
            decision, is_error, usage, summary, attempt,
        )) is True

    async def _emit_start(self) -> None:
        # agent_start, with ordinary backpressure in the caller's context: a run
        # cancelled (or timed out) while its destination does not take it delivers
        # neither it nor agent_end. Delivered means the destination returned; the
        # observers then see it as any other event.
        state = self._state
        event = event_of(EventKind.agent_start, state.run_id, self.agent.agent_id,
                      state.turn, text=state.input)
        if self._emit_to is not None and not taken_now(self._emit_to, event):
            await self._emit_to(event)
        self._state.start_delivered = True
        for hook in self.agent.hookset.on_event:
            await call_hook(self, hook, event)  # type: ignore[arg-type]

    async def hook_error(self, text: str) -> None:
        """Emit the ``error`` event of a failed hook; observers failing on it are not
        reported again. A checkpoint when there is a destination or an observer."""
        state = self._state
        event = event_of(EventKind.error, state.run_id, self.agent.agent_id, state.turn,
                      text=text)
        if self._emit_to is not None:
            await self._emit_to(event)
        for hook in self.agent.hookset.on_event:
            await call_hook(self, hook, event, report=False)  # type: ignore[arg-type]

    async def audit(
        self, kind: str, *, tool: str | None = None, call_id: str | None = None,
        arguments: str | None = None, verdict: str | None = None, reason: str | None = None,
        result: str | None = None, error: str | None = None, duration: float | None = None,
        data: dict[str, Scalar] | None = None,
    ) -> None:
        """Record one audit entry (:meth:`audit_sync`, else await :func:`record`): a
        checkpoint only when the sink is awaited. Raises ``AuditError`` (chained)."""
        sink = self.agent.audit
        if sink is not None:
            state = self._state
            entry = record_fields_sync(
                sink, True, kind, state.run_id, state.path, self.agent.agent_id, tool,
                call_id, arguments, verdict, reason, result, error, duration, data,
            )
            if entry is not None:
                await record(sink, entry)

    # audit_sync and audit_now take the entry's fields as named parameters, not as
    # **fields: a dict built and unpacked again per entry was about a third of the
    # cost of building its Record. They give them positionally to a sink that takes
    # fields (record_fields_sync's fast path, inline: through record_fields_sync, each
    # entry's 13 fields were passed down one call more, ~8% of the bytecodes of a W1
    # run's audit), and to record_fields_sync for anything else.
    def audit_sync(
        self, kind: str, *, tool: str | None = None, call_id: str | None = None,
        arguments: str | None = None, verdict: str | None = None, reason: str | None = None,
        result: str | None = None, error: str | None = None, duration: float | None = None,
        data: dict[str, Scalar] | None = None,
    ) -> Record | None:
        """Record one audit entry now if no await is needed (:func:`record_fields_sync`:
        a sink with ``record_fields_nowait`` or ``record_nowait``, a task not
        cancelled). Not a checkpoint. None when recorded (or no sink); else the
        entry, unrecorded, which the caller awaits :meth:`audit_entry` with before
        going on. Raises ``AuditError``."""
        sink = self.agent.audit
        if sink is None:
            return None
        state = self._state
        fields = fields_nowait_of(sink)
        # record_fields_sync's fast path, inline (see above); anything else (a
        # cancelled task, trio.WouldBlock) goes on to it.
        if fields is not None and not cancelled():
            try:
                fields(
                    kind, state.run_id, state.path, self.agent.agent_id, tool, call_id,
                    arguments, verdict, reason, result, error, duration, data,
                )
                return None
            except trio.WouldBlock:
                pass
            except Exception as exc:
                raise failed(sink, kind, exc) from exc
        return record_fields_sync(
            sink, True, kind, state.run_id, state.path, self.agent.agent_id, tool,
            call_id, arguments, verdict, reason, result, error, duration, data,
        )

    async def audit_entry(self, entry: Record) -> None:
        """Record what :meth:`audit_sync` returned (:func:`record`; raises Cancelled)."""
        if self.agent.audit is not None:
            await record(self.agent.audit, entry)

    def audit_now(
        self, kind: str, *, tool: str | None = None, call_id: str | None = None,
        arguments: str | None = None, verdict: str | None = None, reason: str | None = None,
        result: str | None = None, error: str | None = None, duration: float | None = None,
        data: dict[str, Scalar] | None = None,
    ) -> bool:
        """Record one audit entry for this run without waiting, if its sink can (with
        :func:`record_fields_sync`, not cancellable: not a checkpoint, no
        cancellation check). False, having recorded nothing, when the sink must be
        awaited (:meth:`audit`).

        Raises:
          AuditError: the sink failed (its exception chained).
        """
        sink = self.agent.audit
        if sink is None:
            return True
        state = self._state
        fields = fields_nowait_of(sink)
        if fields is not None:
            # record_fields_sync's fast path, inline, with no cancellation check.
            try:
                fields(
                    kind, state.run_id, state.path, self.agent.agent_id, tool, call_id,
                    arguments, verdict, reason, result, error, duration, data,
                )
                return True
            except trio.WouldBlock:
                return False
            except Exception as exc:
                raise failed(sink, kind, exc) from exc
        return record_fields_sync(
            sink, False, kind, state.run_id, state.path, self.agent.agent_id, tool,
            call_id, arguments, verdict, reason, result, error, duration, data,
        ) is None

    async def note_interrupt(self) -> None:
        """Emit ``interrupt_received`` for the graceful interrupt, once per run."""
        if not self._state.interrupt_noted:
            self._state.interrupt_noted = True
            await self.emit(EventKind.interrupt_received, text="interrupt")

    def add_message(self, message: Message) -> None:
        """Append ``message`` to the conversation. Not a checkpoint."""
        self._state.messages.append(message)

    def add_messages(self, messages: Iterable[Message]) -> None:
        """Append ``messages`` to the conversation, in order. Not a checkpoint."""
        self._state.messages.extend(messages)

    def replace_history(self, messages: Sequence[Message]) -> None:
        """Replace the conversation (in place) by its shortened version. Not a checkpoint."""
        self._state.messages[:] = messages

    def add_usage(self, usage: Usage) -> None:
        """Add a model response's usage to the run's. Not a checkpoint."""
        self._state.usage = self._state.usage + usage

    def count_calls(self, calls: int) -> None:
        """Count tool calls (skipped ones count as calls, not as errors). Not a checkpoint."""
        self._state.tool_calls += calls

    def count_outcome(self, outcome: ToolOutcome) -> None:
        """Count a tool call's denial or error. Not a checkpoint."""
        if outcome.denied:
            self._state.denied += 1
        elif outcome.is_error:
            self._state.tool_errors += 1

    @property
    def pausing(self) -> bool:
        """Whether a gate deferred a call this turn (the run pauses next)."""
        return self._state.pausing

    def note_deferral(self) -> None:
        """Note that a gate deferred a call. Not a checkpoint."""
        self._state.pausing = True

    def pause_calls(self, pending: list[PendingCall], children: list[RunState]) -> None:
        """Keep the paused turn's unanswered calls and paused subruns. Not a checkpoint."""
        self._state.pending = pending
        self._state.children = children

    def end_as(self, summary: RunSummary) -> None:
        """Set how the run ended (its end may turn it to ``error``). Not a checkpoint."""
        self._state.summary = summary
