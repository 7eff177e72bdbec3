"""The agentcore error hierarchy."""

from __future__ import annotations

from typing import overload

import trio


class AgentCoreError(Exception):
    """Base class of every error agentcore raises."""


class ConfigurationError(AgentCoreError):
    """An Agent or tool was configured wrongly; raised at construction, never mid-run."""


class AuditError(AgentCoreError):
    """The audit sink failed to record an entry (its exception is the cause).

    Audit fails closed: an action whose entry cannot be recorded does not happen,
    and the run ends ``error`` with this error.
    """


class OutputValidationError(AgentCoreError):
    """A run that must answer with typed output (``Agent(output_type=...)``) gave no
    valid ``final_result`` within ``output_retries`` retries; the run ends ``error``.

    The message says how many attempts were invalid and what was wrong with the last.
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


#: An exception's message is quoted in at most this many characters (a tool, gate or
#: hook may raise with text it read from outside: the model, events and the ledger see
#: it, so it is bounded like everything else from outside).
MAX_DESCRIBED_CHARS = 4096


@overload
def describe(exc: BaseException) -> str: ...
@overload
def describe(exc: None) -> None: ...
def describe(exc: BaseException | None) -> str | None:
    """``"TypeName: message"`` for an exception (just the type name without a message),
    the message cut to :data:`MAX_DESCRIBED_CHARS` with a note saying how long it was."""
    if exc is None:
        return None
    text = _cancel_text(exc) if isinstance(exc, trio.Cancelled) else str(exc)
    if len(text) > MAX_DESCRIBED_CHARS:
        text = f"{text[:MAX_DESCRIBED_CHARS]}... ({len(text)} characters in all)"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__



def _cancel_text(exc: trio.Cancelled) -> str:
    # trio's own text names the cancelling task by its repr (a memory address, in
    # audit entries): its source and reason only.
    source = getattr(exc, "source", None)
    if source is None:
        return str(exc)
    reason = getattr(exc, "reason", None)
    return f"cancelled due to {source}" + (f" with reason {reason!r}" if reason else "")


class RunStateError(AgentCoreError):
    """A ``RunState`` cannot be read or answered: its JSON is malformed, too large
    or nested too deeply, was written by an incompatible version, or does not match
    its digest (edited by hand); or an answer names a call that is not waiting for one.
    """


class CallPaused(AgentCoreError):
    """Raised by a tool whose call cannot finish before a human answers a run it
    started (the delegation tool, when its subagent paused): the calling run pauses
    too, keeping ``state`` as one of its ``RunState.children``. On resume the tool is
    called again with the same arguments while ``agentcore.lowlevel.resumed_call_state()``
    returns that state, and continues it instead of starting anew. Such a tool must
    say so with ``resumes_paused_calls = True`` (the delegation tool does; so does a
    ``FunctionTool(..., resumes_paused_calls=True)``): resuming a state whose
    delegated call names any other tool is a ``ResumeError``, since a resumed
    delegated call does not pass the gate again.

    Attributes:
      state: The paused run's state (a ``RunState``).
    """

    def __init__(self, reason: str, state: object) -> None:
        super().__init__(reason)
        self.state = state


class ResumeError(AgentCoreError):
    """A ``RunState`` does not fit what resumes it: another agent's state, a tool or
    agent name it needs that is missing, a deferred call not yet answered, or a state
    that is not paused."""
