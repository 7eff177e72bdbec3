"""One model call of a turn, with the history budget, hooks, retries and recovery."""

from __future__ import annotations

import operator
from collections.abc import Awaitable
from typing import TYPE_CHECKING

import attrs
import trio

from .._errors import ContextTooLongError, TransientModelError, describe
from .._events import EventKind
from .._history import drop_oldest_half, fit
from .._messages import Message, ModelRequest, ModelResponse, ToolSpec
from .._steering import LENGTH_RECOVERY
from ._hookcall import intercept

if TYPE_CHECKING:
    from ._port import RunPort


async def complete(
    run: RunPort, tools: tuple[ToolSpec, ...], *, transient: int = 0, context: int = 0,
    length: int = 0,
) -> ModelResponse:
    """Get the turn's response and record it (history, usage, events, audit). A checkpoint.

    Before each call the history is fitted to the agent's budget. Transient errors,
    context-too-long errors and ``length`` responses are retried as the agent's
    :class:`RetryPolicy` says, each retry announced by a ``retry`` event (a transient
    error's also by a ``retry`` audit entry holding it). Other errors, and the last
    one when retries are exhausted, propagate.

    ``transient``, ``context`` and ``length`` are the retries of each kind made
    already (by :func:`retry_direct` and :func:`settle`, after a direct call).
    """
    # The rare steps are helpers: this frame is part of every run parked in its
    # model call (unless the call is direct), so it keeps few locals.
    agent = run.agent
    while True:
        if agent.budgeted:
            await _fit(run)
        request = ModelRequest(_conversation(run), tools)
        if agent.hookset.before_model:
            request = await _before_model(run, request)
        try:
            if not run.emit_now(EventKind.model_request):
                await run.emit(EventKind.model_request)
            response = await call_model(run, request)
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


def call_model(run: RunPort, request: ModelRequest) -> Awaitable[ModelResponse]:
    """The turn's model call for ``request``, to await (a checkpoint): the model's
    ``stream``, its deltas sent as ``model_delta`` events (:meth:`RunPort.emit_delta`),
    when it streams, else its ``complete``. Not a checkpoint itself: it makes the
    model's coroutine and adds no frame of its own to a run parked in the call."""
    agent = run.agent
    if agent.streams:
        return agent.model.stream(request, run.emit_delta)  # type: ignore[attr-defined,no-any-return]
    return agent.model.complete(request)


def direct(run: RunPort, tools: tuple[ToolSpec, ...]) -> ModelRequest | None:
    """The request of the turn's model call when the run may await the model in its
    own frame (``Run.run`` does: a run parked in its model call then holds no frame
    of this module), else None: the run awaits :func:`complete`. Not a checkpoint.

    Direct when the call is a plain one: no ``before_model`` hook, and the history
    within the agent's budget as it is. The run then emits ``model_request``, awaits
    :func:`call_model` (streamed or not), and goes on with :func:`settle` (its
    response) or :func:`retry_direct` (a retried error): the same events, entries
    and retries as :func:`complete`.
    """
    agent = run.agent
    if agent.hookset.before_model:
        return None
    if agent.budgeted:
        # Within a budget of max_messages alone, a count says so as fit_history would.
        limit = agent.max_messages
        fits = agent.history_limit is None and limit is not None and len(run.messages) <= limit
        if not fits and fit_history(run) is not None:
            return None
    return ModelRequest(_conversation(run), tools)


def _conversation(run: RunPort) -> tuple[Message, ...]:
    # The conversation as the request's tuple: the turn's snapshot itself while the
    # conversation is the same messages (a tuple fewer per run parked in its first
    # call), else a copy. O(length), as the copy is.
    messages = run.messages
    snapshot = run.state.snapshot
    if len(snapshot) == len(messages) and all(map(operator.is_, snapshot, messages)):
        return snapshot
    return tuple(messages)


async def settle(
    run: RunPort, tools: tuple[ToolSpec, ...], request: ModelRequest, response: ModelResponse
) -> ModelResponse:
    """Go on after a direct call (:func:`direct`) returned ``response``, as
    :func:`complete` does: ``after_model`` hooks, a ``length`` retry, the record. A
    checkpoint."""
    agent = run.agent
    if agent.hookset.after_model:
        response = await _after_model(run, request, response)
    if response.finish_reason == "length" and agent.retry.length_retries > 0:
        await _retry_length(run, response, 1)
        return await complete(run, tools, length=1)
    await _record_response(run, response)
    return response


async def retry_direct(
    run: RunPort, tools: tuple[ToolSpec, ...], exc: TransientModelError | ContextTooLongError
) -> ModelResponse:
    """Go on after a direct call (:func:`direct`) raised ``exc``, as :func:`complete`
    does: its first retry (or ``exc`` again, when none is allowed). A checkpoint."""
    if isinstance(exc, TransientModelError):
        await _retry_transient(run, exc, 1)
        return await complete(run, tools, transient=1)
    await _retry_shorter(run, exc, 1)
    return await complete(run, tools, context=1)


def fit_history(run: RunPort) -> list[Message] | None:
    """The run's history fitted to the agent's budget, or None when it fits as it is.
    Not a checkpoint."""
    agent = run.agent
    return fit(
        run.messages,
        max_messages=agent.max_messages,
        limit=agent.history_limit,
        counter=agent.history_counter,
    )


async def _fit(run: RunPort) -> None:
    # Fit the history to the agent's budget before a call.
    fitted = fit_history(run)
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
    text = f"{describe(exc)}; retrying in {delay:g}s"
    # Audited as well as announced: a model server's failure is in the ledger even when
    # a retry then succeeds.
    await run.audit("retry", error=text, data={"attempt": attempt})
    await run.emit(EventKind.retry, text=text, attempt=attempt)
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
    await run.report(
        EventKind.model_response, "model_response", message=message, usage=response.usage,
        result=message.content,
        data={
            "finish_reason": response.finish_reason,
            "tool_calls": len(message.tool_calls),
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
        },
    )
