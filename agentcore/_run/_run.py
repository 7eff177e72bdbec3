"""One run of an Agent: the handle other tasks steer it with, and the turn loop
(in :meth:`Run.run` itself; the RunPort methods are in ``_runport``)."""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio

from .._errors import ContextTooLongError, TransientModelError
from .._events import EventKind, EventSink
from .._messages import AgentPath, Message
from .._steering import INTERRUPT_NOTE, SKIPPED_INTERRUPTED
from .._summary import EndReason, RunSummary
from ._checkpoint import at_end, at_turn, opening
from ._end import conclude, summarise
from ._modelcall import complete, direct, retry_direct, settle
from ._output import OutputCheck
from ._result import RunResult
from ._resume import audit_answers, finish_pending, last_answer
from ._runhandle import RunHandle, ScopeOwner, uncancelled
from ._runport import RunPortMethods
from ._state import Phase, RunState
from ._toolcall import run_tools, skip_calls

if TYPE_CHECKING:
    from .._agent import Agent
    from .._steering import Pending

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


_current_run: contextvars.ContextVar[Run | None] = contextvars.ContextVar(
    "agentcore_current_run", default=None
)


def current_run() -> Run | None:
    """The run whose loop (or tool call, or hook) the calling task belongs to, if any."""
    return _current_run.get()


class Run(RunPortMethods, RunHandle):
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
    ``_runport``, the control requests in ``_runhandle``).

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
                # A plain model call is awaited here, not in complete(): a frame
                # fewer for every run parked in it (see _modelcall.direct).
                request = direct(self, self.agent.tool_specs)
                if request is None:
                    response = await complete(self, self.agent.tool_specs)
                else:
                    try:
                        if not self.emit_now(EventKind.model_request):
                            await self.emit(EventKind.model_request)
                        response = await self.agent.model.complete(request)
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
                summary, error = await self._conclude(summary, error)
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
        self, summary: RunSummary, error: BaseException | None
    ) -> tuple[RunSummary, BaseException | None]:
        # The run's end entries and events (see conclude). A checkpoint.
        return await conclude(self, self._state, summary, error, self.agent.audit is not None)

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

    async def _announce(self, injected: Sequence[Pending]) -> None:
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
