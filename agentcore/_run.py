"""One run of an Agent: the turn loop, tool execution through the gate, events and audit."""

from __future__ import annotations

import contextvars
import itertools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ._events import Event, EventKind, EventSink
from ._gate import ALLOW, GateDecision, GateRequest
from ._messages import AgentPath, Message, ModelRequest, ModelResponse, ToolCall, Usage
from ._summary import EndReason, RunSummary
from ._tools import Liveness, Tool, liveness_of

if TYPE_CHECKING:
    from ._agent import Agent

_run_ids = itertools.count(1)
_FAILED = frozenset({EndReason.error, EndReason.timeout})
_current_run: contextvars.ContextVar[Run | None] = contextvars.ContextVar(
    "agentcore_current_run", default=None
)


def current_run() -> Run | None:
    """The run whose loop (or tool call) the calling task belongs to, if any."""
    return _current_run.get()


@attrs.frozen(slots=True, eq=False)
class RunResult:
    """What a finished run produced.

    Attributes:
      output: The final assistant text ("" when the run ended without one).
      summary: The run's :class:`RunSummary`.
      messages: The whole conversation, system prompt included.
      exception: The exception that ended the run ``error`` (for chaining), else None.
    """

    output: str
    summary: RunSummary
    messages: tuple[Message, ...]
    exception: BaseException | None = None


@attrs.frozen(slots=True)
class ToolOutcome:
    """The result text of one tool call and whether it is an error."""

    text: str
    is_error: bool = False
    denied: bool = False


class Run:
    """One execution of an Agent on one input: the handle and the loop.

    Create it with :meth:`Agent.new_run`; ``await run.run()`` executes it once.
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
        self._emit_to = emit
        self._started = False
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

    def __repr__(self) -> str:
        state = self.summary.end_reason if self.summary else ("running" if self._started else "new")
        return f"<agentcore.Run {self.run_id} path={self.path!r} turn={self._turn} {state}>"

    # -- events and audit ------------------------------------------------------------

    async def emit(self, kind: EventKind, **fields: Any) -> None:
        """Send one event of this run to its destination; a checkpoint when there is one."""
        if self._emit_to is not None:
            await self._emit_to(
                Event(kind, self.run_id, self.agent.agent_id, self._turn, **fields)
            )

    async def audit(self, kind: str, **fields: Any) -> None:
        """Record one audit entry for this run; a checkpoint when there is a sink."""
        sink = self.agent.audit
        if sink is not None:
            from ledger import Record

            await sink.record(
                Record(kind, self.run_id, self.path, self.agent.agent_id, **fields)
            )

    # -- the loop ----------------------------------------------------------------------

    async def run(self) -> RunResult:
        """Execute the run to its end. A checkpoint.

        Returns the :class:`RunResult`; a model failure ends the run ``error``
        without raising. Cancellation ends it ``aborted``, emits ``agent_end`` and
        audits the abort (shielded, bounded by the agent's ``end_timeout``) and
        propagates.
        """
        if self._started:
            raise RuntimeError(f"run {self.run_id} was already started")
        self._started = True
        token = _current_run.set(self)
        clock_start = trio.current_time()
        output = ""
        reason = EndReason.stop
        error: BaseException | None = None
        start_delivered = False
        try:
            with trio.CancelScope(shield=True) as start_scope:
                start_scope.deadline = trio.current_time() + self.agent.end_timeout
                await self.emit(EventKind.agent_start, text=self.input)
                start_delivered = not start_scope.cancelled_caught
            await self.audit("prompt", arguments=self.input)
            output, reason = await self._loop()
        except Exception as exc:
            reason, error = EndReason.error, exc
        except BaseException as exc:
            reason, error = EndReason.aborted, exc
        finally:
            _current_run.reset(token)
            self.summary = RunSummary(
                turns=self._turn,
                tool_calls=self._tool_calls,
                tool_errors=self._tool_errors,
                denied=self._denied,
                usage=self._usage,
                end_reason=reason,
                error=_describe(error) if reason in _FAILED else None,
                duration=trio.current_time() - clock_start,
            )
            await self._finish(start_delivered, error)
        if reason is EndReason.aborted and error is not None:
            raise error
        return RunResult(output, self.summary, tuple(self.messages), error)

    async def _finish(self, start_delivered: bool, error: BaseException | None) -> None:
        assert self.summary is not None
        summary = self.summary
        with trio.move_on_after(self.agent.end_timeout, shield=True):
            if summary.end_reason is EndReason.aborted:
                await self.audit("abort", error=_describe(error) or "cancelled")
            elif summary.end_reason is EndReason.error:
                await self.emit(EventKind.error, text=summary.error or "")
            if start_delivered:
                await self.emit(EventKind.agent_end, summary=summary)
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

    async def _loop(self) -> tuple[str, EndReason]:
        agent = self.agent
        last_text = ""
        while self._turn < agent.max_turns:
            self._turn += 1
            await self.emit(EventKind.turn_start)
            response = await self._call_model(ModelRequest(tuple(self.messages), agent.tool_specs))
            message = response.message
            self._usage = self._usage + response.usage
            self.messages.append(message)
            last_text = message.content
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
            if not message.tool_calls:
                return message.content, EndReason.stop
            for call in message.tool_calls:
                outcome = await self.call_tool(call)
                self.messages.append(
                    Message("tool", outcome.text, tool_call_id=call.id, is_error=outcome.is_error)
                )
        return last_text, EndReason.max_turns

    async def _call_model(self, request: ModelRequest) -> ModelResponse:
        await self.emit(EventKind.model_request)
        model = self.agent.model
        if self.agent.streams:

            async def on_delta(text: str) -> None:
                await self.emit(EventKind.model_delta, text=text)

            response: ModelResponse = await model.stream(request, on_delta)  # type: ignore[attr-defined]
            return response
        return await model.complete(request)

    # -- tools -------------------------------------------------------------------------

    async def call_tool(self, call: ToolCall) -> ToolOutcome:
        """Gate and execute one tool call, with its events and audit. A checkpoint.

        Every failure (unknown tool, arguments that are not a JSON object, a
        denial, a tool that raises or times out) becomes an error outcome.
        """
        self._tool_calls += 1
        await self.emit(EventKind.tool_start, call=call)
        await self.audit("tool_request", tool=call.name, call_id=call.id, arguments=call.arguments)
        started = trio.current_time()
        outcome = await self._gated_execute(call)
        if outcome.denied:
            self._denied += 1
        elif outcome.is_error:
            self._tool_errors += 1
        await self.emit(EventKind.tool_end, call=call, text=outcome.text, is_error=outcome.is_error)
        await self.audit(
            "tool_result",
            tool=call.name,
            call_id=call.id,
            result=None if outcome.is_error else outcome.text,
            error=outcome.text if outcome.is_error else None,
            duration=trio.current_time() - started,
        )
        return outcome

    async def _gated_execute(self, call: ToolCall) -> ToolOutcome:
        agent = self.agent
        tool = agent.tools_by_name.get(call.name)
        if tool is None:
            names = ", ".join(sorted(agent.tools_by_name)) or "none"
            return ToolOutcome(f"unknown tool {call.name!r}; available tools: {names}", True)
        problem = _argument_problem(call)
        if problem is not None:
            return ToolOutcome(problem, True)
        decision = await self._decide(tool, call)
        await self.emit(EventKind.gate_decision, call=call, decision=decision)
        await self.audit(
            "gate_decision",
            tool=call.name,
            call_id=call.id,
            verdict="allow" if decision.allowed else "deny",
            reason=decision.reason,
        )
        if not decision.allowed:
            return ToolOutcome(f"denied: {decision.reason}", True, True)
        return await self._execute(tool, call)

    async def _decide(self, tool: Tool, call: ToolCall) -> GateDecision:
        gate = self.agent.gate
        if gate is None:
            return ALLOW
        timeout = self.agent.gate_timeout
        try:
            with trio.move_on_after(timeout):
                return await gate(GateRequest(self.path, tool, call))
        except Exception as exc:
            return GateDecision(False, f"the gate failed: {_describe(exc)}")
        return GateDecision(False, f"the gate did not decide within {timeout:g}s")

    async def _execute(self, tool: Tool, call: ToolCall) -> ToolOutcome:
        timeout = self.agent.tool_timeout
        try:
            if liveness_of(tool) is Liveness.self_monitoring:
                return ToolOutcome(await tool.execute(call.arguments))
            with trio.move_on_after(timeout):
                return ToolOutcome(await tool.execute(call.arguments))
        except Exception as exc:
            return ToolOutcome(f"tool {call.name!r} failed: {_describe(exc)}", True)
        return ToolOutcome(f"tool {call.name!r} timed out after {timeout:g}s", True)


def _argument_problem(call: ToolCall) -> str | None:
    try:
        value = json.loads(call.arguments)
    except (ValueError, TypeError) as exc:
        return f"invalid JSON arguments for tool {call.name!r}: {exc}"
    if not isinstance(value, dict):
        return (
            f"arguments for tool {call.name!r} must be a JSON object, "
            f"not {type(value).__name__}"
        )
    return None


def _describe(exc: BaseException | None) -> str | None:
    if exc is None:
        return None
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
