"""A model that falls back on other models when one fails: :class:`FallbackModel`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from .._errors import ConfigurationError, ContextTooLongError, ModelError, TransientModelError
from .._messages import ModelRequest, ModelResponse
from .._models import ChatModel, DeltaSink
from .._retry import RetryPolicy

#: The longest error text of one member quoted in the error raised when all fail.
_ERROR_CHARS = 300


def model_name(model: object) -> str:
    """What messages and ``Usage.model`` call ``model``: its ``name`` (a wrapper's, such
    as :class:`FallbackModel`'s) or ``model`` (the adapters' model id) when it is a
    non-empty string, else its class name."""
    for attribute in ("name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def _exception_types(value: Any) -> tuple[type[BaseException], ...]:
    kinds = tuple(value) if isinstance(value, tuple | list) else (value,)
    for kind in kinds:
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            raise ConfigurationError(
                f"FallbackModel on= takes exception classes, not {kind!r}"
            )
        if issubclass(kind, trio.Cancelled):  # pragma: no cover - Cancelled is a BaseException
            raise ConfigurationError("FallbackModel cannot fall back on trio.Cancelled")
    return kinds


@attrs.define(eq=False, init=False)
class FallbackModel:
    """A :class:`~agentcore.ChatModel` that asks its models in order until one answers.

    ``FallbackModel(primary, *others)`` calls ``primary``; when that call fails with
    one of the ``on`` errors (by default :class:`~agentcore.TransientModelError`: HTTP
    429, 5xx, timeouts, dropped connections) it calls the next model, and so on. Any
    other error propagates at once, and the models after it are not asked.

    Retries, in order: with ``retry=None`` (the default) each model is called once per
    call of the FallbackModel and a failure falls through at once; when every model
    has failed, the agent loop's own :class:`~agentcore.RetryPolicy` retries the whole
    chain (from ``primary`` again) if the last error was transient. With
    ``retry=RetryPolicy(...)`` each model gets up to ``max_attempts`` calls for its
    transient errors, sleeping ``retry.delay(n, retry_after)`` between them, before the
    next model is asked (these sleeps emit no ``retry`` event, so they count as idle
    time for a ``Spec.idle_timeout``).

    The answer says which model gave it: its ``usage.model`` is the model id the
    adapter reported, or, when the adapter left it empty, :func:`model_name` of the
    member that answered (an adapter's model id, e.g. ``gpt-4o-mini``). The loop's
    ``model_response`` event carries that usage.

    When every model fails, the error raised is of the last error's kind
    (:class:`~agentcore.ContextTooLongError`, :class:`~agentcore.TransientModelError`
    with the last ``retry_after``, or :class:`~agentcore.ModelError`), with a message
    naming each model and its error (each cut to 300 characters; adapters' messages
    never hold a key), chained to the last error. An ``on`` error that is not a
    ModelError is re-raised as it is, with the earlier failures added as notes.

    It streams (is a :class:`StreamingFallbackModel`, with ``stream``) when every
    member does. A member that fails part-way through a stream has already sent its
    deltas, and the next member's text follows them: the consumer sees the failed
    attempt's partial text first (the final response holds only the answer's).

    Attributes:
      models: The models, in the order they are asked.
      on: The errors that make it ask the next model.
      retry: Per-model retries of transient errors before falling through, or None.
      name: The name messages use: the members' names joined by ``|``.
    """

    models: tuple[ChatModel, ...]
    on: tuple[type[BaseException], ...]
    retry: RetryPolicy | None
    name: str

    def __init__(
        self,
        primary: ChatModel,
        *others: ChatModel,
        on: type[BaseException] | tuple[type[BaseException], ...] = (TransientModelError,),
        retry: RetryPolicy | None = None,
    ) -> None:
        models = (primary, *others)
        for model in models:
            if not callable(getattr(model, "complete", None)):
                raise ConfigurationError(
                    f"FallbackModel takes ChatModels, and {model!r} has no complete()"
                )
        self.__attrs_init__(
            models, _exception_types(on), retry, "|".join(model_name(m) for m in models)
        )

    def __new__(cls, primary: ChatModel, *others: ChatModel, **_: Any) -> FallbackModel:
        # The agent streams when its model has `stream`: only if every member does.
        streams = all(callable(getattr(m, "stream", None)) for m in (primary, *others))
        if cls is FallbackModel and streams:
            cls = StreamingFallbackModel
        return object.__new__(cls)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The first answer of the models, in order. A checkpoint.

        Raises the errors the class docstring describes.
        """
        return await self._first(lambda model: model.complete(request))

    async def _first(
        self, call: Callable[[ChatModel], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        failures: list[tuple[ChatModel, BaseException]] = []
        for model in self.models:
            attempt = 0
            while True:
                attempt += 1
                try:
                    response = await call(model)
                except self.on as exc:
                    delay = self._retry_delay(exc, attempt)
                    if delay is None:
                        failures.append((model, exc))
                        break
                    await trio.sleep(delay)
                    continue
                if response.usage.model:
                    return response
                usage = attrs.evolve(response.usage, model=model_name(model))
                return attrs.evolve(response, usage=usage)
        raise _all_failed(failures)

    def _retry_delay(self, exc: BaseException, attempt: int) -> float | None:
        # Seconds before calling the same model again, or None to ask the next one.
        retry = self.retry
        if retry is None or attempt >= retry.max_attempts:
            return None
        if not isinstance(exc, TransientModelError):
            return None
        return retry.delay(attempt, exc.retry_after)


class StreamingFallbackModel(FallbackModel):
    """The :class:`FallbackModel` of models that all stream (``FallbackModel(...)``
    returns one then): a :class:`~agentcore.StreamingChatModel`."""

    __slots__ = ()

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse:
        """The first answer of the models, in order, streamed to ``on_delta``. A
        checkpoint. Raises as :meth:`FallbackModel.complete`."""
        return await self._first(
            lambda model: model.stream(request, on_delta)  # type: ignore[attr-defined]
        )


def _all_failed(failures: list[tuple[ChatModel, BaseException]]) -> BaseException:
    last = failures[-1][1]
    parts = []
    for model, exc in failures:
        text = str(exc) or type(exc).__name__
        if len(text) > _ERROR_CHARS:
            text = text[: _ERROR_CHARS - 3] + "..."
        parts.append(f"{model_name(model)}: {text}")
    message = f"all {len(failures)} models failed: " + "; ".join(parts)
    error: ModelError
    if isinstance(last, ContextTooLongError):
        error = ContextTooLongError(message)
    elif isinstance(last, TransientModelError):
        error = TransientModelError(message, retry_after=last.retry_after)
    elif isinstance(last, ModelError):
        error = ModelError(message)
    else:
        for part in parts[:-1]:
            last.add_note(f"FallbackModel: earlier failure: {part}")
        return last
    error.__cause__ = last
    return error
