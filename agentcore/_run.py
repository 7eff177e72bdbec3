"""One run of an Agent: the handle other tasks steer it with, and the turn loop."""

from __future__ import annotations

import contextvars
import enum
import itertools
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ledger import Record

from ._audit import NOTHING_TO_RECORD, overrun, record
from ._errors import AuditError, describe
from ._events import Event, EventKind, EventSink
from ._hooks import call_hook
from ._messages import AgentPath, Message, ModelResponse, ToolCall, Usage
from ._modelcall import complete
from ._steering import INTERRUPT_NOTE, SKIPPED_INTERRUPTED, Pending, RunEndedError
from ._summary import EndReason, RunSummary
from ._toolcall import ToolOutcome, call_tool, run_tools, skip_calls

if TYPE_CHECKING:
    from ._agent import Agent

_run_ids = itertools.count(1)
_FAILED = frozenset({EndReason.error, EndReason.timeout})
# The steps of a run's end, in order (see Run._finish).
_ABORT_ENTRY, _END_ENTRY, _END_EVENTS, _DONE = range(4)
_current_run: contextvars.ContextVar[Run | None] = contextvars.ContextVar(
    "agentcore_current_run", default=None
)


def current_run() -> Run | None:
    """The run whose loop (or tool call, or hook) the calling task belongs to, if any."""
    return _current_run.get()


class _State(enum.Enum):
    new = "new"
    running = "running"
    ended = "ended"


@attrs.frozen(slots=True, eq=False)
class RunResult:
    """What a finished run produced.

    Attributes:
      output: The final assistant text ("" when the run ended without one, or aborted).
      summary: The run's :class:`RunSummary`.
      messages: The whole conversation, system prompt included (after a hard abort:
        as it was at the start of the aborted turn).
      exception: The exception that ended the run ``error`` (for chaining), else None.
      follow_ups: Messages for the caller to run next, in the order received:
        those sent with :meth:`Run.follow_up`, then steering the run did not read.
    """

    output: str
    summary: RunSummary
    messages: tuple[Message, ...]
    exception: BaseException | None = None
    follow_ups: tuple[str, ...] = ()


class Run:
    """One execution of an Agent on one input: the handle and the loop.

    Create it with :meth:`Agent.new_run`; ``await run.run()`` executes it once, in
    the calling task. Other tasks control it with the sync, non-checkpoint methods
    :meth:`steer`, :meth:`follow_up`, :meth:`interrupt` and :meth:`abort`. Before
    the run starts they are queued and take effect when it does. Once the run has
    ended (or decided to end), :meth:`steer` and :meth:`follow_up` raise
    :class:`RunEndedError` and :meth:`interrupt` and :meth:`abort` do nothing.

    Attributes:
      messages: The conversation so far (a live list; read it, do not change it).
      summary: The :class:`RunSummary` once the run has ended, else None.
    """

    def __init__(
        self,
        agent: Agent,
        input: str,
        *,
        path: AgentPath,
        emit: EventSink | None,
        run_id: str | None,
        history: Sequence[Message],
    ) -> None:
        self.agent = agent
        self.input = input
        self.path = path
        self.run_id = run_id if run_id is not None else f"run-{next(_run_ids)}"
        self.summary: RunSummary | None = None
        self.interrupt_requested = False
        self._emit_to = emit
        self._observers = agent.hookset.on_event
        self._state = _State.new
        self._scope: trio.CancelScope | None = None
        self._abort_reason: str | None = None
        self._interrupt_noted = False
        self._inbox: list[Pending] = []
        self._preempting = 0
        self._follow_ups: list[str] = []
        self._reported = 0
        self._start_delivered = False
        self._turn = 0
        self._tool_calls = 0
        self._tool_errors = 0
        self._denied = 0
        self._usage = Usage()
        messages: list[Message] = []
        if agent.system_prompt:
            messages.append(Message("system", agent.system_prompt))
        messages.extend(history)
        messages.append(Message("user", input))
        self.messages = messages
        self._snapshot = tuple(messages)

    def __repr__(self) -> str:
        state = self.summary.end_reason if self.summary else self._state.value
        return f"<agentcore.Run {self.run_id} path={self.path!r} turn={self._turn} {state}>"

    # -- control from other tasks ------------------------------------------------------

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
        self._follow_ups.append(text)

    def interrupt(self) -> None:
        """Ask the run to stop gracefully. Not a checkpoint; idempotent.

        Tool calls running now finish; the turn's other calls are skipped (each gets
        a ``skipped: interrupted`` result and a ``tool_skipped`` event); a note is
        added and the model is called once more, without tools, to summarise. The
        run ends ``interrupted`` (``interrupt_received`` when the loop notices). If
        the model has already answered without tool calls, that answer is the output.
        Does nothing once the run has ended.
        """
        if self._state is not _State.ended:
            self.interrupt_requested = True

    @property
    def abort_requested(self) -> bool:
        """Whether :meth:`abort` was called (by a hook, too) before the run ended."""
        return self._abort_reason is not None

    def abort(self, reason: str = "") -> None:
        """Stop the run now (hard). Not a checkpoint; idempotent.

        The model call, tools and hooks in progress are cancelled, the conversation
        is rolled back to its snapshot at the start of the current turn, and the
        run ends ``aborted`` (``interrupt_received`` with text ``abort: <reason>``,
        then ``agent_end``); :meth:`run` returns the result. Does nothing once the
        run has ended.
        """
        if self._state is _State.ended or self._abort_reason is not None:
            return
        self._abort_reason = reason
        if self._scope is not None:
            self._scope.cancel()

    def put(self, pending: Pending) -> None:
        """Add ``pending`` to the inbox read at the top of the next iteration. Not a checkpoint.

        Raises:
          RunEndedError: the run has ended.
        """
        self._check_open("put")
        self._inbox.append(pending)
        if pending.preempts:
            self._preempting += 1

    @property
    def ended(self) -> bool:
        """Whether the run has ended or decided to end: steering is no longer accepted."""
        return self._state is _State.ended

    @property
    def has_pending(self) -> bool:
        """Whether messages that preempt tool calls (``Pending.preempts``) are waiting."""
        return self._preempting > 0

    def _check_open(self, what: str) -> None:
        if self._state is _State.ended:
            raise RunEndedError(
                f"cannot {what}: run {self.run_id} has ended; start a new run instead"
            )

    # -- events, audit and counters ----------------------------------------------------

    async def emit(self, kind: EventKind, **fields: Any) -> None:
        """Send one event of this run to its destination, then to its observer hooks.

        A checkpoint when there is either.
        """
        if self._emit_to is None and not self._observers:
            return
        event = Event(kind, self.run_id, self.agent.agent_id, self._turn, **fields)
        if self._emit_to is not None:
            await self._emit_to(event)
        for hook in self._observers:
            await call_hook(self, hook, event)

    async def _emit_start(self) -> None:
        # agent_start, with ordinary backpressure in the caller's context: a run
        # cancelled (or timed out) while its destination does not take it delivers
        # neither it nor agent_end. Delivered means the destination returned; the
        # observers then see it as any other event.
        event = Event(EventKind.agent_start, self.run_id, self.agent.agent_id, self._turn,
                      text=self.input)
        if self._emit_to is not None:
            await self._emit_to(event)
        self._start_delivered = True
        for hook in self._observers:
            await call_hook(self, hook, event)

    async def hook_error(self, text: str) -> None:
        """Emit the ``error`` event of a failed hook; observers failing on it are not
        reported again. A checkpoint when there is a destination or an observer."""
        event = Event(EventKind.error, self.run_id, self.agent.agent_id, self._turn, text=text)
        if self._emit_to is not None:
            await self._emit_to(event)
        for hook in self._observers:
            await call_hook(self, hook, event, report=False)

    def audit(self, kind: str, **fields: Any) -> Awaitable[None]:
        """Record one audit entry for this run (with :func:`record`): await the result.
        A checkpoint when there is a sink.

        Raises (when awaited):
          AuditError: the sink failed (its exception chained): the caller must not
            go on with the action the entry records.
        """
        # Not a coroutine itself: it hands over record's, so this hot path costs one
        # coroutine per entry, and none without a sink.
        sink = self.agent.audit
        if sink is None:
            return NOTHING_TO_RECORD
        return record(sink, Record(kind, self.run_id, self.path, self.agent.agent_id, **fields))

    def count_call(self) -> None:
        """Count one tool call. Not a checkpoint."""
        self._tool_calls += 1

    def count_skipped(self, calls: int) -> None:
        """Count skipped tool calls (they count as calls, not as errors). Not a checkpoint."""
        self._tool_calls += calls

    def count_outcome(self, outcome: ToolOutcome) -> None:
        """Count a tool call's denial or error. Not a checkpoint."""
        if outcome.denied:
            self._denied += 1
        elif outcome.is_error:
            self._tool_errors += 1

    async def emit_skipped(self, calls: Sequence[ToolCall], text: str) -> None:
        """Emit ``tool_skipped`` for calls answered with ``text`` by ``skip_calls``
        (after ``interrupt_received`` if that is why). A checkpoint when there is a
        destination."""
        if self.interrupt_requested:
            await self._note_interrupt()
        for call in calls:
            await self.emit(EventKind.tool_skipped, call=call, text=text)

    async def compressed(self, messages: list[Message]) -> None:
        """Replace the history by its shortened version and emit ``context_compressed``."""
        before = len(self.messages)
        self.messages[:] = messages
        await self.emit(
            EventKind.context_compressed,
            text=f"dropped {before - len(messages)} of {before} messages",
        )

    async def record_response(self, response: ModelResponse) -> None:
        """Add a model response to the history, usage, events and audit. A checkpoint
        when there is a destination or a sink."""
        message = response.message
        self._usage = self._usage + response.usage
        self.messages.append(message)
        await self.emit(EventKind.model_response, message=message, usage=response.usage)
        await self.audit(
            "model_response",
            result=message.content,
            data={
                "finish_reason": response.finish_reason,
                "tool_calls": len(message.tool_calls),
                "input_tokens": response.usage.input_tokens,
                "output_tokens": response.usage.output_tokens,
            },
        )

    async def call_tool(self, call: ToolCall) -> ToolOutcome:
        """Gate and execute one tool call, with its hooks, events and audit. A checkpoint.

        Every failure (unknown tool, arguments that are not a JSON object, a
        denial, a tool that raises or times out) becomes an error outcome.
        """
        return await call_tool(self, call)

    # -- the loop ----------------------------------------------------------------------

    async def run(self) -> RunResult:
        """Execute the run to its end. A checkpoint.

        Returns the :class:`RunResult`; a model failure ends the run ``error``
        without raising, and so does :meth:`abort` (``aborted``). Cancellation from
        outside ends it ``aborted``, emits ``agent_end`` and audits the abort
        (shielded, bounded by the agent's ``end_timeout``) and propagates.
        ``agent_start`` is emitted unshielded, with ordinary backpressure: a run
        cancelled before its destination took it emits no ``agent_end`` either
        (start and end pair up).

        Raises:
          RuntimeError: the run was started before.
        """
        if self._state is not _State.new:
            raise RuntimeError(f"run {self.run_id} was already started")
        self._state = _State.running
        token = _current_run.set(self)
        clock_start = trio.current_time()
        output = ""
        reason = EndReason.stop
        error: BaseException | None = None
        scope = self._scope = trio.CancelScope()
        if self._abort_reason is not None:
            scope.cancel()
        try:
            if self._emit_to is not None or self._observers:
                await self._emit_start()
            with scope:
                await self.audit("prompt", arguments=self.input)
                output, reason = await self._loop()
            if scope.cancel_called:
                output, reason = "", EndReason.aborted
                self.messages[:] = self._snapshot
        except Exception as exc:
            reason, error = EndReason.error, exc
        except BaseException as exc:
            reason, error = EndReason.aborted, exc
        finally:
            _current_run.reset(token)
            self._close()
            self.summary = RunSummary(
                turns=self._turn,
                tool_calls=self._tool_calls,
                tool_errors=self._tool_errors,
                denied=self._denied,
                usage=self._usage,
                end_reason=reason,
                error=describe(error) if reason in _FAILED else None,
                duration=trio.current_time() - clock_start,
            )
            error = await self._finish(self._start_delivered, error)
            reason = self.summary.end_reason
        if reason is EndReason.aborted and error is not None:
            raise error
        return RunResult(
            output, self.summary, tuple(self.messages), error, tuple(self._follow_ups)
        )

    def _close(self) -> None:
        # The sync point where the run stops accepting messages: unread steering
        # becomes follow-ups.
        if self._state is _State.ended:
            return
        self._state = _State.ended
        self._follow_ups.extend(p.follow_up for p in self._inbox if p.follow_up is not None)
        self._inbox.clear()
        self._preempting = 0

    async def _finish(
        self, start_delivered: bool, error: BaseException | None
    ) -> BaseException | None:
        # Returns the exception that ended the run: ``error``, or the AuditError of a
        # run_end entry that could not be recorded (the run then ends ``error``: its
        # end is audited before agent_end announces it). The steps (the abort entry,
        # the run_end entry, the final emits) are shielded and bounded apart, each by
        # end_timeout, so a hung sink cannot hold back agent_end. They share one scope
        # whose deadline moves on after each step; a step that overruns ends it, and
        # the next step gets a new one.
        assert self.summary is not None
        failures: list[AuditError] = []
        step = _ABORT_ENTRY if self.summary.end_reason is EndReason.aborted else _END_ENTRY
        if self.agent.audit is None:
            step = _END_EVENTS
        # A run whose agent_start was not delivered emits none of its end: its events,
        # when it has any, are bracketed by agent_start and agent_end.
        last = _DONE if start_delivered else _END_EVENTS
        timeout = self.agent.end_timeout
        while step < last:
            with trio.CancelScope(shield=True, deadline=trio.current_time() + timeout) as scope:
                while step < last:
                    if step == _END_EVENTS:
                        await self._end_events(error is None, failures)
                    else:
                        try:
                            await self._end_entry(step, error)
                        except AuditError as exc:
                            error = self._entry_failed(exc, failures, error)
                    step += 1
                    if step == last or scope.cancel_called:
                        break
                    scope.deadline = trio.current_time() + timeout
            if scope.cancelled_caught:
                if step != _END_EVENTS:
                    kind = "abort" if step == _ABORT_ENTRY else "run_end"
                    error = self._entry_failed(overrun(kind, timeout), failures, error)
                step += 1
        return error

    async def _end_entry(self, step: int, error: BaseException | None) -> None:
        # The abort or run_end audit entry. Raises AuditError.
        summary = self.summary
        assert summary is not None
        if step == _ABORT_ENTRY:
            why = describe(error) or self._abort_reason or "cancelled"
            await self.audit("abort", error=why)
            return
        await self.audit(
            "run_end",
            error=summary.error,
            duration=summary.duration,
            data={
                "end_reason": str(summary.end_reason),
                "turns": summary.turns,
                "tool_calls": summary.tool_calls,
                "input_tokens": summary.usage.input_tokens,
                "output_tokens": summary.usage.output_tokens,
            },
        )

    def _entry_failed(
        self, failure: AuditError, failures: list[AuditError], error: BaseException | None
    ) -> BaseException | None:
        # An end entry that could not be recorded. An abort cannot be refused: it goes
        # on, and the failure is reported; a run_end failure ends the run ``error``
        # (unless it already ended so). Returns the run's exception.
        summary = self.summary
        assert summary is not None
        if summary.end_reason is EndReason.aborted:
            failures.append(failure)
        elif summary.end_reason is not EndReason.error:
            self.summary = attrs.evolve(
                summary, end_reason=EndReason.error, error=describe(failure)
            )
            return failure
        return error

    async def _end_events(self, no_error: bool, failures: list[AuditError]) -> None:
        summary = self.summary
        assert summary is not None
        if summary.end_reason is EndReason.aborted and no_error:
            text = f"abort: {self._abort_reason}" if self._abort_reason else "abort"
            await self.emit(EventKind.interrupt_received, text=text)
        for failure in failures:
            await self.emit(EventKind.error, text=describe(failure) or "")
        if summary.end_reason is EndReason.error:
            await self.emit(EventKind.error, text=summary.error or "")
        if self._reported < len(self._follow_ups):
            await self._report_follow_ups()
        await self.emit(EventKind.agent_end, summary=summary)

    async def _report_follow_ups(self) -> None:
        while self._reported < len(self._follow_ups):
            text = self._follow_ups[self._reported]
            self._reported += 1
            await self.emit(EventKind.follow_up_queued, text=text)

    async def _note_interrupt(self) -> None:
        if not self._interrupt_noted:
            self._interrupt_noted = True
            await self.emit(EventKind.interrupt_received, text="interrupt")

    async def _loop(self) -> tuple[str, EndReason]:
        agent = self.agent
        last_text = ""
        while True:
            if self._abort_reason is not None:
                # Stop here even if nothing since the abort was a checkpoint.
                await trio.lowlevel.checkpoint()
            if self.interrupt_requested:
                return await self._summarise()
            if self._turn >= agent.max_turns:
                self._close()
                return last_text, EndReason.max_turns
            self._turn += 1
            injected = self._read_inbox()
            self._snapshot = tuple(self.messages)
            await self.emit(EventKind.turn_start)
            for pending in injected:
                message = pending.message
                if pending.event is not None:
                    await self.emit(pending.event, message=message, text=message.content)
                if pending.on_read is not None:
                    await pending.on_read()
            if self._reported < len(self._follow_ups):
                await self._report_follow_ups()
            message = (await complete(self, agent.tool_specs)).message
            last_text = message.content
            if message.tool_calls:
                await run_tools(self, message.tool_calls)
                continue
            if self.interrupt_requested:
                self._close()
                await self._note_interrupt()
                return last_text, EndReason.interrupted
            if self._inbox and self._turn < agent.max_turns:
                continue
            self._close()
            return last_text, EndReason.stop

    def _read_inbox(self) -> list[Pending]:
        injected = self._inbox
        if injected:
            self._inbox = []
            self._preempting = 0
            self.messages.extend(p.message for p in injected)
        return injected

    async def _summarise(self) -> tuple[str, EndReason]:
        await self._note_interrupt()
        self._turn += 1
        self._snapshot = tuple(self.messages)
        self.messages.append(Message("user", INTERRUPT_NOTE))
        await self.emit(EventKind.turn_start)
        message = (await complete(self, ())).message
        if message.tool_calls:
            skip_calls(self, message.tool_calls, SKIPPED_INTERRUPTED)
            await self.emit_skipped(message.tool_calls, SKIPPED_INTERRUPTED)
        self._close()
        return message.content, EndReason.interrupted
