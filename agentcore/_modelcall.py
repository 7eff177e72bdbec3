"""One model call of a turn, with the history budget, hooks, retries and recovery."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

from ._errors import ContextTooLongError, TransientModelError, describe
from ._events import EventKind
from ._history import drop_oldest_half, fit
from ._hookcall import intercept
from ._messages import Message, ModelRequest, ModelResponse, ToolSpec
from ._steering import LENGTH_RECOVERY

if TYPE_CHECKING:
    from ._port import RunPort


async def complete(run: RunPort, tools: tuple[ToolSpec, ...]) -> ModelResponse:
    """Get the turn's response and record it (history, usage, events, audit). A checkpoint.

    Before each call the history is fitted to the agent's budget. Transient errors,
    context-too-long errors and ``length`` responses are retried as the agent's
    :class:`RetryPolicy` says, each retry announced by a ``retry`` event. Other
    errors, and the last one when retries are exhausted, propagate.
    """
    # The rare steps are helpers: this frame is part of every run parked in its
    # model call, so it keeps few locals and a shallow stack.
    agent = run.agent
    transient = context = length = 0
    while True:
        if agent.budgeted:
            await _fit(run)
        request = ModelRequest(tuple(run.messages), tools)
        if agent.hookset.before_model:
            request = await _before_model(run, request)
        try:
            if not run.emit_now(EventKind.model_request):
                await run.emit(EventKind.model_request)
            if agent.streams:
                response = await _stream(run, request)
            else:
                response = await agent.model.complete(request)
        except TransientModelError as exc:
            transient += 1
            await _retry_transient(run, exc, transient)
            continue
        except ContextTooLongError as exc:
            context += 1
            await _retry_shorter(run, exc, context)
            continue
        if agent.hookset.after_model:
            response = await _after_model(run, request, response)
        if response.finish_reason == "length" and length < agent.retry.length_retries:
            length += 1
            await _retry_length(run, response, length)
            continue
        await _record_response(run, response)
        return response


async def _fit(run: RunPort) -> None:
    # Fit the history to the agent's budget before a call.
    agent = run.agent
    fitted = fit(
        run.messages,
        max_messages=agent.max_messages,
        limit=agent.history_limit,
        counter=agent.history_counter,
    )
    if fitted is not None:
        await _compressed(run, fitted)


async def _before_model(run: RunPort, request: ModelRequest) -> ModelRequest:
    request, _ = await intercept(
        run, run.agent.hookset.before_model, (run,), request, ModelRequest
    )
    return request


async def _after_model(
    run: RunPort, request: ModelRequest, response: ModelResponse
) -> ModelResponse:
    response, _ = await intercept(
        run, run.agent.hookset.after_model, (run, request), response, ModelResponse
    )
    return response


async def _retry_transient(run: RunPort, exc: TransientModelError, attempt: int) -> None:
    # The transient error of attempt ``attempt``: re-raised when retries are exhausted,
    # else announced and waited out.
    policy = run.agent.retry
    if attempt >= policy.max_attempts:
        raise exc
    delay = policy.delay(attempt, exc.retry_after)
    await run.emit(
        EventKind.retry, text=f"{describe(exc)}; retrying in {delay:g}s", attempt=attempt
    )
    await trio.sleep(delay)


async def _retry_shorter(run: RunPort, exc: ContextTooLongError, attempt: int) -> None:
    # The history was too long (retry ``attempt``): drop its oldest half and announce
    # it; re-raised when it cannot be shortened or retries are exhausted.
    if attempt > run.agent.retry.context_retries:
        raise exc
    shorter = drop_oldest_half(run.messages)
    if shorter is None:
        raise exc
    await _compressed(run, shorter)
    await run.emit(
        EventKind.retry, text=f"{describe(exc)}; retrying shorter", attempt=attempt
    )


async def _retry_length(run: RunPort, response: ModelResponse, attempt: int) -> None:
    # Truncated tool calls may be garbled: keep only the text, then ask again.
    await _record_response(run, attrs.evolve(
        response, message=Message("assistant", response.message.content)
    ))
    run.add_message(Message("user", LENGTH_RECOVERY))
    await run.emit(
        EventKind.retry,
        text="the response was cut off (finish_reason length); asking for a shorter one",
        attempt=attempt,
    )


async def _stream(run: RunPort, request: ModelRequest) -> ModelResponse:
    async def on_delta(text: str) -> None:
        await run.emit(EventKind.model_delta, text=text)

    response: ModelResponse = await run.agent.model.stream(request, on_delta)  # type: ignore[attr-defined]
    return response


async def _compressed(run: RunPort, messages: list[Message]) -> None:
    # Replace the history by its shortened version and emit context_compressed.
    before = len(run.messages)
    run.replace_history(messages)
    await run.emit(
        EventKind.context_compressed,
        text=f"dropped {before - len(messages)} of {before} messages",
    )


async def _record_response(run: RunPort, response: ModelResponse) -> None:
    # Add a model response to the history, usage, events and audit. A checkpoint
    # when there is a destination or a sink.
    message = response.message
    run.add_usage(response.usage)
    run.add_message(message)
    if not run.emit_now(EventKind.model_response, message=message, usage=response.usage):
        await run.emit(EventKind.model_response, message=message, usage=response.usage)
    entry = run.audit_sync(
        "model_response",
        result=message.content,
        data={
            "finish_reason": response.finish_reason,
            "tool_calls": len(message.tool_calls),
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
        },
    )
    if entry is not None:
        await run.audit_entry(entry)
