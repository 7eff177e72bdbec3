"""The end of a run: its ``abort`` or ``run_end`` audit entry, then its end events
(``interrupt_received`` of an abort, errors, follow-ups, ``agent_end``).

Each step is shielded and bounded apart by the agent's ``end_timeout``, so a hung
sink cannot hold back ``agent_end``; an entry a sink takes without waiting (its
``record_nowait``: a sink that never blocks) is recorded without a scope. An entry
that cannot be recorded is an :class:`AuditError`: an abort cannot be refused, so it
goes on and the failure is reported; a ``run_end`` failure ends the run ``error``
(its end is audited before ``agent_end`` announces it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from .._audit import overrun
from .._errors import AuditError, describe
from .._events import EventKind
from .._summary import EndReason, RunSummary, ended

if TYPE_CHECKING:
    from ._port import RunPort
    from ._state import RunState

# The steps of a run's end, in order.
_ABORT_ENTRY, _END_ENTRY, _END_EVENTS, _DONE = range(4)


@attrs.define(eq=False)
class RunEnd:
    """The end of one run, from its summary as the loop left it. Used once.

    Attributes:
      run: The run ending (its audit and emit).
      summary: How it ended; ``finish`` may change it to ``error`` (and tells the
        run with ``end_as``).
      error: The exception that ended it, if any.
      abort_reason: Why it was aborted (hard), if it was.
      follow_ups: Follow-ups not yet announced with ``follow_up_queued``.
      cancel_text: What the ``abort`` entry says of the Cancelled in ``error``, in
        the words of the run's owner (see ``ScopeOwner``), if it has some.
    """

    run: RunPort
    summary: RunSummary
    error: BaseException | None
    abort_reason: str | None
    follow_ups: Sequence[str]
    cancel_text: str | None = None
    _failures: list[AuditError] = attrs.field(factory=list, init=False)

    async def finish(self, *, audited: bool, announced: bool) -> None:
        """Record the end entry (when ``audited``) and emit the end events (when the
        run's ``agent_start`` was ``announced``: its events are bracketed by
        agent_start and agent_end). Shielded; a checkpoint, except that entries taken
        by a sink without waiting (``record_nowait``) are recorded before and outside
        the shielded scope, which is then entered only for the end events (if any),
        and that a lone ``agent_end`` its destination takes now (``emit_now``) is sent
        without one.

        Afterwards ``summary`` and ``error`` say how the run ended: ``error``, or
        the AuditError of a ``run_end`` entry that could not be recorded.
        """
        # The steps share one scope whose deadline moves on after each step (a cancel
        # scope per step costs more); a step that overruns ends it, and the next
        # step gets a new one.
        step = _ABORT_ENTRY if self.summary.end_reason is EndReason.aborted else _END_ENTRY
        if not audited:
            step = _END_EVENTS
        last = _DONE if announced else _END_EVENTS
        # The entries first without a scope when the sink takes them without waiting
        # (record_nowait: they cannot hang, and are recorded even while cancelled).
        while step < _END_EVENTS:
            try:
                if not self._end_entry_now(step):
                    break
            except AuditError as exc:
                self._entry_failed(exc)
            step += 1
        if step == _END_EVENTS and last == _DONE and self._lone_end() and self.run.emit_now(
            EventKind.agent_end, summary=self.summary
        ):
            # A lone agent_end its destination takes now: no scope to enter.
            return
        timeout = self.run.agent.end_timeout
        while step < last:
            with trio.CancelScope(shield=True, deadline=trio.current_time() + timeout) as scope:
                while step < last:
                    if step == _END_EVENTS:
                        await self._end_events(self.error is None)
                    else:
                        try:
                            await self._end_entry(step)
                        except AuditError as exc:
                            self._entry_failed(exc)
                    step += 1
                    if step == last or scope.cancel_called:
                        break
                    scope.deadline = trio.current_time() + timeout
            if scope.cancelled_caught:
                if step != _END_EVENTS:
                    kind = "abort" if step == _ABORT_ENTRY else "run_end"
                    self._entry_failed(overrun(kind, timeout))
                step += 1

    def _end_entry_now(self, step: int) -> bool:
        # The abort or run_end audit entry, if the sink takes it without waiting
        # (False: nothing recorded, await _end_entry). Raises AuditError.
        if step == _ABORT_ENTRY:
            return self.run.audit_now("abort", error=self._abort_text())
        summary = self.summary
        return self.run.audit_now(
            "run_end", error=summary.error, duration=summary.duration, data=self._end_data()
        )

    async def _end_entry(self, step: int) -> None:
        # The abort or run_end audit entry. Raises AuditError.
        if step == _ABORT_ENTRY:
            await self.run.audit("abort", error=self._abort_text())
            return
        summary = self.summary
        await self.run.audit(
            "run_end", error=summary.error, duration=summary.duration, data=self._end_data()
        )

    def _abort_text(self) -> str:
        return self.cancel_text or describe(self.error) or self.abort_reason or "cancelled"

    def _end_data(self) -> dict[str, str | int | float | bool | None]:
        summary = self.summary
        return {
            "end_reason": summary.end_reason._value_,
            "turns": summary.turns,
            "tool_calls": summary.tool_calls,
            "input_tokens": summary.usage.input_tokens,
            "output_tokens": summary.usage.output_tokens,
        }

    def _entry_failed(self, failure: AuditError) -> None:
        # An end entry that could not be recorded. An abort cannot be refused: it goes
        # on, and the failure is reported; a run_end failure ends the run ``error``
        # (unless it already ended so).
        summary = self.summary
        if summary.end_reason is EndReason.aborted:
            self._failures.append(failure)
        elif summary.end_reason is not EndReason.error:
            self.summary = attrs.evolve(
                summary, end_reason=EndReason.error, error=describe(failure)
            )
            self.run.end_as(self.summary)
            self.error = failure

    def _lone_end(self) -> bool:
        # Whether agent_end is the only end event (see _end_events).
        summary = self.summary
        return (
            not self._failures and not self.follow_ups
            and summary.end_reason is not EndReason.error
            and (summary.end_reason is not EndReason.aborted or self.error is not None)
        )

    async def _end_events(self, no_error: bool) -> None:
        summary = self.summary
        run = self.run
        if summary.end_reason is EndReason.aborted and no_error:
            text = f"abort: {self.abort_reason}" if self.abort_reason else "abort"
            await run.emit(EventKind.interrupt_received, text=text)
        for failure in self._failures:
            await run.emit(EventKind.error, text=describe(failure))
        if summary.end_reason is EndReason.error:
            await run.emit(EventKind.error, text=summary.error or "")
        for text in self.follow_ups:
            await run.emit(EventKind.follow_up_queued, text=text)
        await run.emit(EventKind.agent_end, summary=summary)


_FAILED = frozenset({EndReason.error, EndReason.timeout})
# Read once: an enum member read goes through EnumType.__getattr__ (about 200 ns on
# Python 3.11), and every run's end compares with it.
_PAUSED = EndReason.paused


def summarise(
    state: RunState, reason: EndReason, error: BaseException | None, started: float
) -> RunSummary:
    """Close ``state``'s run, which stopped for ``reason`` (``error``: the exception
    that ended it, if any; ``started``: when this stretch of it began), and set its
    summary. Not a checkpoint: a run with a sink or a delivered ``agent_start`` then
    awaits :func:`conclude` (else there is nothing to record or announce)."""
    state.close()
    # Positional, in RunSummary's field order (see ended: every run's end makes one):
    # turns, tool_calls, tool_errors, denied, usage, end_reason, error, duration.
    summary = ended(
        state.turn, state.tool_calls, state.tool_errors, state.denied, state.usage, reason,
        describe(error) if reason in _FAILED else None,
        state.elapsed + (trio.current_time() - started),
    )
    state.summary = summary
    state.elapsed = summary.duration
    if reason is not _PAUSED:
        state.drop_calls()
    return summary


async def conclude(
    run: RunPort, state: RunState, summary: RunSummary, error: BaseException | None,
    audited: bool, cancel_text: str | None = None,
) -> tuple[RunSummary, BaseException | None]:
    """The end entry (when ``audited``: the run has a sink) and events
    (:class:`RunEnd`) of ``run``, summarised already (:func:`summarise`); its
    ``abort`` entry says ``cancel_text`` of a Cancelled that ended it, if given.
    Returns the summary and error as the end left them. A checkpoint."""
    end = RunEnd(run, summary, error, state.abort_reason, state.follow_ups[state.reported:],
                 cancel_text)
    await end.finish(audited=audited, announced=state.start_delivered)
    return end.summary, end.error
