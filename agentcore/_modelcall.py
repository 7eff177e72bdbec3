"""One model call of a turn, with the history budget, hooks, retries and recovery."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

from ._context import drop_oldest_half, fit
from ._errors import ContextTooLongError, TransientModelError, describe
from ._events import EventKind
from ._hooks import intercept
from ._messages import Message, ModelRequest, ModelResponse, ToolSpec
from ._steering import LENGTH_RECOVERY

if TYPE_CHECKING:
    from ._run import Run


async def complete(run: Run, tools: tuple[ToolSpec, ...]) -> ModelResponse:
    """Get the turn's response and record it (history, usage, events, audit). A checkpoint.

    Before each call the history is fitted to the agent's budget. Transient errors,
    context-too-long errors and ``length`` responses are retried as the agent's
    :class:`RetryPolicy` says, each retry announced by a ``retry`` event. Other
    errors, and the last one when retries are exhausted, propagate.
    """
    agent = run.agent
    policy = agent.retry
    hooks = agent.hookset
    transient = context = length = 0
    while True:
        if agent.budgeted:
            fitted = fit(
                run.messages,
                max_messages=agent.max_messages,
                limit=agent.history_limit,
                counter=agent.history_counter,
            )
            if fitted is not None:
                await run.compressed(fitted)
        request = ModelRequest(tuple(run.messages), tools)
        if hooks.before_model:
            request, _ = await intercept(run, hooks.before_model, (run,), request, ModelRequest)
        try:
            await run.emit(EventKind.model_request)
            if agent.streams:
                response = await _stream(run, request)
            else:
                response = await agent.model.complete(request)
        except TransientModelError as exc:
            transient += 1
            if transient >= policy.max_attempts:
                raise
            delay = policy.delay(transient, exc.retry_after)
            await run.emit(
                EventKind.retry, text=f"{describe(exc)}; retrying in {delay:g}s", attempt=transient
            )
            await trio.sleep(delay)
            continue
        except ContextTooLongError as exc:
            shorter = drop_oldest_half(run.messages) if context < policy.context_retries else None
            if shorter is None:
                raise
            context += 1
            await run.compressed(shorter)
            await run.emit(
                EventKind.retry, text=f"{describe(exc)}; retrying shorter", attempt=context
            )
            continue
        if hooks.after_model:
            response, _ = await intercept(
                run, hooks.after_model, (run, request), response, ModelResponse
            )
        if response.finish_reason == "length" and length < policy.length_retries:
            length += 1
            # Truncated tool calls may be garbled: keep only the text, then ask again.
            await run.record_response(attrs.evolve(
                response, message=Message("assistant", response.message.content)
            ))
            run.messages.append(Message("user", LENGTH_RECOVERY))
            await run.emit(
                EventKind.retry,
                text="the response was cut off (finish_reason length); asking for a shorter one",
                attempt=length,
            )
            continue
        await run.record_response(response)
        return response


async def _stream(run: Run, request: ModelRequest) -> ModelResponse:
    async def on_delta(text: str) -> None:
        await run.emit(EventKind.model_delta, text=text)

    response: ModelResponse = await run.agent.model.stream(request, on_delta)  # type: ignore[attr-defined]
    return response
