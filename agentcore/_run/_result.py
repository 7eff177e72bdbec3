"""What a finished (or paused) run produced: :class:`RunResult`."""

from __future__ import annotations

from typing import Any

import attrs

from .._messages import Message
from .._summary import RunSummary
from ._state import RunState


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
      structured: The decoded answer of a typed run (``Agent(output_type=...)``)
        that a valid ``final_result`` call ended (its JSON is ``output``); else None.
      state: The run's :class:`RunState` when it ended ``paused`` (answer its
        ``pending_approvals``, then :meth:`Agent.resume` it), else None.
    """

    output: str
    summary: RunSummary
    messages: tuple[Message, ...]
    exception: BaseException | None = None
    follow_ups: tuple[str, ...] = ()
    structured: Any = None
    state: RunState | None = None
