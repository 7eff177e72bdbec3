"""The agentcore error hierarchy."""

from __future__ import annotations

from typing import overload


class AgentCoreError(Exception):
    """Base class of every error agentcore raises."""


class ConfigurationError(AgentCoreError):
    """An Agent or tool was configured wrongly; raised at construction, never mid-run."""


class AuditError(AgentCoreError):
    """The audit sink failed to record an entry (its exception is the cause).

    Audit fails closed: an action whose entry cannot be recorded does not happen,
    and the run ends ``error`` with this error.
    """


class ModelError(AgentCoreError):
    """A model call failed in a way the model adapter understood.

    Adapters raise the subclasses below so the loop can decide what to retry.
    """


class TransientModelError(ModelError):
    """A model call failed for a reason that may pass (HTTP 429, 5xx, a timeout).

    The loop retries it with exponential backoff and jitter.

    Attributes:
      retry_after: Seconds the server asked to wait before retrying, if it said.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ContextTooLongError(ModelError):
    """The model refused the request because the conversation is too long for it."""


@overload
def describe(exc: BaseException) -> str: ...
@overload
def describe(exc: None) -> None: ...
def describe(exc: BaseException | None) -> str | None:
    """``"TypeName: message"`` for an exception (just the type name without a message)."""
    if exc is None:
        return None
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
