"""One run of an Agent: :class:`Run`, one class in one module. Its parts, in order:
the turn loop (:meth:`Run.run` itself), the port the helpers of a turn go through
(events, audit entries, messages and counters: :class:`agentcore._run._port.RunPort`),
and the handle other tasks steer it with (steer, follow_up, interrupt, abort, put)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import trio

from .._audit import cancelled, failed, record, record_fields_sync
from .._errors import ContextTooLongError, TransientModelError
from .._events import EventKind, EventSink, event_of, taken_now
from .._fastpath import fields_nowait_of
from .._messages import AgentPath, Message
from .._steering import INTERRUPT_NOTE, SKIPPED_INTERRUPTED, InboxMessage, RunEndedError
from .._summary import EndReason, RunSummary
from ._checkpoint import at_end, at_turn, opening
from ._end import conclude, summarise
from ._hookcall import call_hook
from ._modelcall import call_model, complete, direct, retry_direct, settle
from ._output import OutputCheck
from ._port import _current_run as _current_run
from ._result import RunResult
from ._resume import audit_answers, finish_pending, last_answer
from ._state import Phase, RunState
from ._toolcall import run_tools, skip_calls

if TYPE_CHECKING:
    from ledger import Record
    from ledger._entry import Scalar

    from .._agent import Agent
    from .._messages import ToolCall, Usage
    from .._tools._gate import GateDecision
    from .._tools._tools import ToolOutcome
    from ._pending import PendingCall

_run_ids = itertools.count(1)
# Read once for the way out of a cancelled run: an enum member read goes through
# EnumType.__getattr__ (about 200 ns on Python 3.11).
_ABORTED = EndReason.aborted


class _OwnScope:
    """The owner of a run started without one (see ``ScopeOwner``): a scope of its
    own, which only the run's abort cancels."""

    __slots__ = ("_scope",)

    def __init__(self) -> None:
        self._scope = trio.CancelScope()

    def _cancelled_otherwise(self) -> bool:
        return False

    def _cancel_text(self) -> str | None:
        return None


def current_run() -> Run | None:
    """The run whose loop (or tool call, or hook) the calling task belongs to, if any."""
    return cast("Run | None", _current_run.get())  # only Run.run sets it


class ScopeOwner(Protocol):
    """What runs a :class:`agentcore.Run` inside a cancel scope of its own (the
    pool's task: ``Run.run(owner=task)``): the run then has no scope of its own, and
    :meth:`RunHandle.abort` cancels the owner's (a cancel scope per run fewer).

    ``_scope`` is the scope the owner has entered around ``run()``; the owner also
    cancels it (its cancel, its deadline). ``_cancelled_otherwise()`` says whether
    the owner cancelled it, or its deadline passed: a Cancelled reaching the run
    while it says False, after an abort, is the abort's. ``_cancel_text()`` is what
    the run's ``abort`` entry says of a Cancelled that ended it, in the owner's words
    (who cancelled it), or None to describe the Cancelled itself (its source). None
    is a checkpoint.
    """

    _scope: trio.CancelScope

    def _cancelled_otherwise(self) -> bool: ...

    def _cancel_text(self) -> str | None: ...


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


class Run:
    """One execution of an Agent on one input: the handle and the loop.

    Create it with :meth:`Agent.new_run`; ``await run.run()`` executes it once, in
    the calling task. Other tasks control it with the sync, non-checkpoint methods
    :meth:`steer`, :meth:`follow_up`, :meth:`interrupt` and :meth:`abort`. Before
    the run starts they are queued and take effect when it does. Once the run has
    ended (or decided to end), :meth:`steer` and :meth:`follow_up` raise
    :class:`RunEndedError` and :meth:`interrupt` and :meth:`abort` do nothing.

    The run's mutable state is one value (``RunState``) that the Run alone writes;
    the helpers of its turns (model call, tool calls, hooks, its end) get the Run as
    a ``RunPort``, the narrow interface it implements for them (its methods are in
    ``_run._run``, the control requests in ``_run._run``).

    Attributes:
      messages: The conversation so far (a live list; read it, do not change it).
      summary: The :class:`RunSummary` once the run has ended, else None.
    """

    # Slotted: a parked run keeps no instance dict (about 100 B each).
    __slots__ = ("_emit_to", "_output", "_resuming", "_scope", "_state", "agent")

    agent: Agent

    def __init__(
        self,
        agent: Agent,
        input: str,
        *,
        path: AgentPath,
        emit: EventSink | None,
        run_id: str | None,
        history: Sequence[Message],
        resume: RunState | None = None,
    ) -> None:
        self.agent = agent
        self._emit_to = emit
        self._scope: trio.CancelScope | None = None
        # A typed run's attempts at its answer (not part of RunState: a resumed
        # typed run starts its count of invalid answers again).
        self._output = (
            None if agent.output is None else OutputCheck(agent.output, agent.output_retries)
        )
        self._resuming = resume is not None
        if resume is not None:
            # Agent.new_run_from checked it; this run owns it now.
            resume.reopen()
            self._state = resume
            return
        messages = opening(agent.system_message() or "", history, input)
        self._state = RunState.begin(
            messages, run_id=run_id if run_id is not None else f"run-{next(_run_ids)}",
            agent=agent.agent_id, path=path, input=input,
        )

    def __repr__(self) -> str:
        state = self._state
        shown = state.summary.end_reason if state.summary else state.phase.value
        return f"<agentcore.Run {self.run_id} path={self.path!r} turn={state.turn} {shown}>"

    # The run's input, path and id are its state's (a resumed run's are the paused
    # run's): read-only here, and not kept twice.

    @property
    def input(self) -> str:
        """The user message the run started on."""
        return self._state.input

    @property
    def path(self) -> AgentPath:
        """The run's AgentPath."""
        return self._state.path

    @property
    def run_id(self) -> str:
        """The id the run's events and audit entries carry."""
        return self._state.run_id

    @property
    def messages(self) -> list[Message]:
        """The conversation so far (a live list; read it, do not change it)."""
        return self._state.messages

    @property
    def summary(self) -> RunSummary | None:
        """The :class:`RunSummary` once the run has ended, else None."""
        return self._state.summary

    @property
    def state(self) -> RunState:
        """The run's state (its only writer is this Run; a paused run's is answered, resumed)."""
        return self._state

    # -- the loop ----------------------------------------------------------------------

    async def run(self, *, owner: ScopeOwner | None = None) -> RunResult:
        """Execute the run to its end. A checkpoint.

        Returns the :class:`RunResult`; a model failure ends the run ``error``
        without raising, and so does :meth:`abort` (``aborted``). Cancellation from
        outside ends it ``aborted``, emits ``agent_end`` and audits the abort
        (shielded, bounded by the agent's ``end_timeout``) and propagates.
        ``agent_start`` is emitted unshielded, with ordinary backpressure: a run
        cancelled before its destination took it emits no ``agent_end`` either
        (start and end pair up).

        Args:
          owner: What runs this run inside a cancel scope it entered (the pool's
            task, see ``ScopeOwner``): from the end of ``agent_start`` on,
            :meth:`abort` cancels that scope instead of one of the run's own, and a
            Cancelled the owner did not cause (after an abort) ends the run as an
            abort does. Without one the run is its own owner (a scope that only its
            abort cancels, around this call): the same ends and events.

        Raises:
          RuntimeError: the run was started before.
        """
        if owner is None:
            # A run without an owner is its own: the same steps, in a scope only its
            # abort cancels (so the owner's path, every pool run's, enters no
            # context manager of its own).
            own = _OwnScope()
            with own._scope:
                return await self.run(owner=own)
            # Not reached: the run handles its abort's Cancelled itself.
            raise AssertionError(f"run {self.run_id}: its own scope caught a Cancelled")
        state = self._state
        if state.phase is not Phase.new:
            raise RuntimeError(f"run {self.run_id} was already started")
        state.phase = Phase.running
        # The outer value, not set()'s Token, is kept to restore it: a Token is 64 B
        # of every parked run.
        outer = _current_run.get()
        _current_run.set(self)
        clock_start = trio.current_time()
        output = last_text = ""
        reason = EndReason.stop
        error: BaseException | None = None
        try:
            if self._emit_to is not None or self.agent.hookset.on_event:
                await self._emit_start()
            # The owner's scope is entered already; it becomes the run's (for abort)
            # once agent_start is out.
            self._scope = owner._scope
            if state.abort_reason is not None:
                owner._scope.cancel()
            if self._resuming:
                last_text = await self._resume()
            else:
                # The prompt through audit_sync's inline path (audit() goes through
                # record_fields_sync: a frame of 15 arguments more per run); when it
                # must be awaited (nothing was recorded), through audit(). No local
                # for the entry: a slot of every parked run's frame.
                if self.audit_sync("prompt", arguments=self.input) is not None:
                    await self.audit("prompt", arguments=self.input)
            # The turn loop, in this frame: every parked run holds it.
            while True:
                if state.abort_reason is not None:
                    # Stop here even if nothing since the abort was a checkpoint.
                    await trio.lowlevel.checkpoint()
                if state.pausing:
                    state.close()
                    output, reason = "", EndReason.paused
                    break
                if state.interrupt_requested:
                    output, reason = await self._summarise()
                    break
                if state.turn >= self.agent.max_turns:
                    state.close()
                    output, reason = last_text, EndReason.max_turns
                    break
                if self.agent.checkpoint is not None:
                    await at_turn(state, self.agent.checkpoint)
                injected = state.read_inbox()
                state.begin_turn()
                if not self.emit_now(EventKind.turn_start):
                    await self.emit(EventKind.turn_start)
                if injected:
                    await self._announce(injected)
                if state.unreported:
                    await self._report_follow_ups()
                # A plain model call, streamed or not, is awaited here, not in
                # complete(): a frame fewer for every run parked in it (see
                # _modelcall.direct).
                request = direct(self, self.agent.tool_specs)
                if request is None:
                    response = await complete(self, self.agent.tool_specs)
                else:
                    try:
                        if not self.emit_now(EventKind.model_request):
                            await self.emit(EventKind.model_request)
                        response = await call_model(self, request)
                    except (TransientModelError, ContextTooLongError) as exc:
                        response = await retry_direct(self, self.agent.tool_specs, exc)
                    else:
                        response = await settle(self, self.agent.tool_specs, request, response)
                # (No local for the agent or the message: each is a slot of every
                # parked run's frame.)
                last_text = response.message.content
                if self._output is not None and (
                    response.message.tool_calls or not state.interrupt_requested
                ):
                    # Typed output: the answer must be a valid final_result call.
                    if await self._output.answer(self, response.message):
                        state.close()
                        output, reason = self._output.text, EndReason.stop
                        break
                    continue
                if response.message.tool_calls:
                    await run_tools(self, response.message.tool_calls)
                    continue
                if state.interrupt_requested:
                    state.close()
                    await self.note_interrupt()
                    output, reason = last_text, EndReason.interrupted
                    break
                if state.has_inbox and state.turn < self.agent.max_turns:
                    continue
                state.close()
                output, reason = last_text, EndReason.stop
                break
            # An abort the body did not see (no checkpoint since) ends it too.
            if state.abort_reason is not None:
                output, reason = "", EndReason.aborted
                state.roll_back()
        except Exception as exc:
            reason, error = EndReason.error, exc
        except BaseException as exc:
            output, reason, error = self._caught(owner, exc, output)
        finally:
            _current_run.set(outer)
            summary = self._summary(reason, error, clock_start)
            if self.agent.audit is not None or state.start_delivered:
                summary, error = await self._conclude(summary, error, owner)
            reason = summary.end_reason
        if self.agent.checkpoint is not None:
            await at_end(state, self.agent.checkpoint, self.agent.end_timeout)
        if reason is _ABORTED and error is not None:
            # Re-raised without this frame keeping it: the traceback holds this
            # frame, so a local bound to the exception would be a reference cycle,
            # left to the garbage collector with every frame of the cancelled run.
            # (Not ``try: raise error; finally: del error``: with trio.Cancelled's
            # ABC metaclass each handler it passes costs a subclass check.)
            held = [error]
            del error
            raise held.pop()
        return self._result(output, summary, error)

    # What run() does at its end, apart (as ``conclude`` is): what run()'s frame
    # holds while the run is parked (its locals, its stack) is part of every parked run.

    def _caught(
        self, owner: ScopeOwner, exc: BaseException, output: str
    ) -> tuple[str, EndReason, BaseException | None]:
        # The output, end reason and error of a run whose body raised ``exc``, not an
        # Exception (a Cancelled, mostly): it ends aborted with it; but after an
        # abort, the abort's Cancelled is caught as the run's own scope would have
        # (unless the owner cancelled too: its cancel, its deadline), and what else
        # the body raised with it goes on.
        state = self._state
        if self._scope is not None and state.abort_reason is not None:
            rest = uncancelled(exc)
            if rest is None and not owner._cancelled_otherwise():
                state.roll_back()
                return "", _ABORTED, None
            if rest is not exc and not owner._cancelled_otherwise():
                # What else the body raised with it (the scope lets it through).
                return output, EndReason.error if isinstance(rest, Exception) else _ABORTED, rest
        return output, _ABORTED, exc

    def _summary(
        self, reason: EndReason, error: BaseException | None, started: float
    ) -> RunSummary:
        # The run's summary, set in its state (see summarise). Not a checkpoint.
        return summarise(self._state, reason, error, started)

    async def _conclude(
        self, summary: RunSummary, error: BaseException | None, owner: ScopeOwner
    ) -> tuple[RunSummary, BaseException | None]:
        # The run's end entries and events (see conclude), a Cancelled that ended it
        # told in its owner's words. A checkpoint.
        why = None
        if error is not None and summary.end_reason is _ABORTED and isinstance(
            error, trio.Cancelled
        ):
            why = owner._cancel_text()
        return await conclude(self, self._state, summary, error, self.agent.audit is not None,
                              why)

    def _result(
        self, output: str, summary: RunSummary, error: BaseException | None
    ) -> RunResult:
        state = self._state
        reason = summary.end_reason
        checked = self._output
        return RunResult(
            output, summary, tuple(state.messages), error, tuple(state.follow_ups),
            checked.value if checked is not None and reason is EndReason.stop else None,
            state if reason is EndReason.paused else None,
        )

    async def _report_follow_ups(self) -> None:
        state = self._state
        while state.reported < len(state.follow_ups):
            text = state.follow_ups[state.reported]
            state.reported += 1
            await self.emit(EventKind.follow_up_queued, text=text)

    async def _resume(self) -> str:
        # The answers and run_resumed entries and the paused turn's calls, before the
        # loop; returns the last answer so far.
        state = self._state
        pending, state.pending = state.pending, []
        children, state.children = state.children, []
        await audit_answers(self, pending)
        if state.turn == 0 and not pending:
            # Recovered from before its first turn (a ``start`` checkpoint, or a crash
            # before the first model call): it restarts from its input, and records
            # its prompt as a run that starts does (again, if the crash came after).
            await self.audit("prompt", arguments=self.input)
        await finish_pending(self, pending, children)
        return last_answer(state.messages)

    async def _announce(self, injected: Sequence[InboxMessage]) -> None:
        # The messages read from the inbox at the top of a turn: their events and
        # on_read callbacks, in order (apart from run(), whose frame every parked run
        # holds).
        for pending in injected:
            message = pending.message
            if pending.event is not None:
                await self.emit(pending.event, message=message, text=message.content)
            if pending.on_read is not None:
                await pending.on_read()

    async def _summarise(self) -> tuple[str, EndReason]:
        state = self._state
        await self.note_interrupt()
        state.begin_turn()
        state.messages.append(Message("user", INTERRUPT_NOTE))
        await self.emit(EventKind.turn_start)
        message = (await complete(self, ())).message
        if message.tool_calls:
            await skip_calls(self, message.tool_calls, SKIPPED_INTERRUPTED)
        state.close()
        return message.content, EndReason.interrupted

    # -- the port: the RunPort side (agentcore._run._port) ---------------------------
    # The events, audit entries, messages and counters the helpers of a run's turns
    # (model call, tool calls, hooks, its end) go through. They read and write the
    # run's ``RunState``, the one value the run owns.

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
            await call_hook(self, hook, event)

    # emit_now takes the event's fields as named parameters, not as **fields: a dict
    # built and unpacked again into event_of for each of a run's events.
    async def emit_delta(self, text: str) -> None:
        """Send a ``model_delta`` event of ``text``: the ``on_delta`` of a streamed model
        call (:func:`~._modelcall.call_model`). A checkpoint as :meth:`emit` is."""
        await self.emit(EventKind.model_delta, text=text)

    def emit_now(
        self, kind: EventKind, text: str = "", message: Message | None = None,
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

    async def report(
        self, kind: EventKind, entry: str, *, text: str = "", message: Message | None = None,
        call: ToolCall | None = None, decision: GateDecision | None = None,
        is_error: bool = False, usage: Usage | None = None, tool: str | None = None,
        call_id: str | None = None, arguments: str | None = None, verdict: str | None = None,
        reason: str | None = None, result: str | None = None, error: str | None = None,
        duration: float | None = None, data: dict[str, Scalar] | None = None,
    ) -> None:
        """One step of the run told twice: its event of ``kind`` (the event's fields:
        ``text`` to ``usage``), then its audit entry of kind ``entry`` (the entry's:
        ``tool`` to ``data``). Each goes the synchronous way when it can
        (:meth:`emit_now`, :meth:`audit_sync`), else is awaited. A checkpoint only
        when the destination, an observer or the sink is awaited.

        Raises:
          AuditError: the entry could not be recorded (the step must not go on).
        """
        # The fields positionally: a keyword per field costs more per call.
        if not self.emit_now(kind, text, message, call, decision, is_error, usage):
            await self.emit(
                kind, text=text, message=message, call=call, decision=decision,
                is_error=is_error, usage=usage,
            )
        unrecorded = self.audit_sync(
            entry, tool, call_id, arguments, verdict, reason, result, error, duration, data
        )
        if unrecorded is not None and self.agent.audit is not None:
            await record(self.agent.audit, unrecorded)

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
            await call_hook(self, hook, event)

    async def hook_error(self, text: str) -> None:
        """Emit the ``error`` event of a failed hook; observers failing on it are not
        reported again. A checkpoint when there is a destination or an observer."""
        state = self._state
        event = event_of(EventKind.error, state.run_id, self.agent.agent_id, state.turn,
                      text=text)
        if self._emit_to is not None:
            await self._emit_to(event)
        for hook in self.agent.hookset.on_event:
            await call_hook(self, hook, event, report=False)

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
        self, kind: str, tool: str | None = None, call_id: str | None = None,
        arguments: str | None = None, verdict: str | None = None, reason: str | None = None,
        result: str | None = None, error: str | None = None, duration: float | None = None,
        data: dict[str, Scalar] | None = None,
    ) -> Record | None:
        """Record one audit entry now if no await is needed (:func:`record_fields_sync`:
        a sink with ``record_fields_nowait`` or ``record_nowait``, a task not
        cancelled). Not a checkpoint. None when recorded (or no sink); else the
        entry, unrecorded, which the caller awaits :func:`record` with before
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

    # -- the handle: what other tasks send a run --------------------------------------
    # The control requests (steer, follow_up, interrupt, abort, put) and what other
    # tasks may read of the run. All synchronous, none a checkpoint; each checks, then
    # makes one transition of the run's :class:`RunState`.

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
        self.put(InboxMessage(Message("user", text), EventKind.steering_injected, text))

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

    def put(self, pending: InboxMessage) -> None:
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
        """Whether messages that preempt tool calls (``InboxMessage.preempts``) are waiting."""
        return self._state.preempting > 0

    def _check_open(self, what: str) -> None:
        if self._state.phase is Phase.ended:
            raise RunEndedError(
                f"cannot {what}: run {self._state.run_id} has ended; start a new run instead"
            )
