"""The narrow interface a run gives the helpers of its turns (model call, tool calls,
hooks, its end): what they may read of the run, and the few ways they may change it.

:class:`Run` is its one implementation and the only writer of the run's state
(``RunState``): a helper reads the conversation and the control flags, and changes
the run only through the methods below (events, audit entries, messages, counters),
so every rule about the run's state stays in ``_run`` and ``_state``. Depending on
these protocols instead of ``Run`` keeps the helpers out of an import cycle with it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ledger import Record
    from ledger._entry import Scalar

    from .._events import EventKind
    from .._history import MessageCounter
    from .._hookset import HookSet
    from .._messages import AgentPath, Message, ToolCall, Usage
    from .._models import ChatModel
    from .._retry import RetryPolicy
    from .._summary import RunSummary
    from .._tools._gate import GateDecision, ToolGate
    from .._tools._tools import Tool, ToolOutcome
    from ._checkpoint import Checkpointer
    from ._pending import PendingCall
    from ._state import RunState

#: The run whose loop (or tool call, or hook) the calling task belongs to: set by
#: ``Run.run`` (here, not in ``_run``, so that the helpers read it without importing
#: ``Run``: ``current_tool_call`` is the call of this run only). Typed by the port, not
#: ``Run``, which this module does not import (``current_run`` gives it as a ``Run``).
_current_run: contextvars.ContextVar[RunPort | None] = contextvars.ContextVar(
    "agentcore_current_run", default=None
)


class AgentSettings(Protocol):
    """The configuration of an :class:`Agent` the helpers read (never write)."""

    @property
    def model(self) -> ChatModel: ...
    @property
    def streams(self) -> bool: ...
    @property
    def retry(self) -> RetryPolicy: ...
    @property
    def budgeted(self) -> bool: ...
    @property
    def max_messages(self) -> int | None: ...
    @property
    def history_limit(self) -> int | None: ...
    @property
    def history_counter(self) -> MessageCounter: ...
    @property
    def hookset(self) -> HookSet: ...
    @property
    def hook_timeout(self) -> float: ...
    @property
    def tools_by_name(self) -> Mapping[str, Tool]: ...
    @property
    def read_only_names(self) -> frozenset[str]: ...
    @property
    def self_monitoring_names(self) -> frozenset[str]: ...
    @property
    def max_parallel_tools(self) -> int: ...
    @property
    def tool_timeout(self) -> float: ...
    @property
    def gate(self) -> ToolGate | None: ...
    @property
    def gate_timeout(self) -> float: ...
    @property
    def end_timeout(self) -> float: ...
    @property
    def checkpoint(self) -> Checkpointer | None: ...


class RunPort(Protocol):
    """What a helper of a run may see and do. Its implementation is the :class:`Run`,
    which is also what interceptor hooks receive as their ``run`` argument.

    The reads are live: the conversation is the run's own list (read it, do not
    change it) and the flags change when other tasks steer or interrupt the run.
    """

    @property
    def agent(self) -> AgentSettings:
        """The agent's configuration."""
        ...

    @property
    def path(self) -> AgentPath:
        """The run's AgentPath (shown to the gate)."""
        ...

    @property
    def state(self) -> RunState:
        """The run's state (read it; the run changes it)."""
        ...

    @property
    def messages(self) -> Sequence[Message]:
        """The conversation so far."""
        ...

    @property
    def interrupt_requested(self) -> bool:
        """Whether a graceful interrupt is pending."""
        ...

    @property
    def has_pending(self) -> bool:
        """Whether messages that preempt tool calls are waiting."""
        ...

    @property
    def abort_requested(self) -> bool:
        """Whether the run was aborted (hard)."""
        ...

    @property
    def pausing(self) -> bool:
        """Whether a gate deferred a call this turn: nothing new may start."""
        ...

    def note_deferral(self) -> None:
        """Note that a gate deferred a call: the run pauses at the next safe point."""
        ...

    def pause_calls(self, pending: list[PendingCall], children: list[RunState]) -> None:
        """Keep the paused turn's calls without a result, in call order, and the states
        of the runs its delegated calls left paused."""
        ...

    async def emit(self, kind: EventKind, **fields: Any) -> None:
        """Send one event of the run to its destination and observers."""
        ...

    async def emit_delta(self, text: str) -> None:
        """Send a ``model_delta`` event of ``text`` (a streamed call's ``on_delta``)."""
        ...

    def emit_now(
        self, kind: EventKind, *, text: str = "", message: Message | None = None,
        call: ToolCall | None = None, decision: GateDecision | None = None,
        is_error: bool = False, usage: Usage | None = None, summary: RunSummary | None = None,
        attempt: int = 0,
    ) -> bool:
        """Send one event of the run now if nothing must be awaited (not a checkpoint):
        True when sent (or there is nowhere to send it); False, having sent nothing,
        when the caller must await :meth:`emit` instead."""
        ...

    async def report(
        self, kind: EventKind, entry: str, *, text: str = "", message: Message | None = None,
        call: ToolCall | None = None, decision: GateDecision | None = None,
        is_error: bool = False, usage: Usage | None = None, tool: str | None = None,
        call_id: str | None = None, arguments: str | None = None, verdict: str | None = None,
        reason: str | None = None, result: str | None = None, error: str | None = None,
        duration: float | None = None, data: dict[str, Scalar] | None = None,
    ) -> None:
        """Emit the event of one step of the run, then record its audit entry, each
        without awaiting when it can; raises ``AuditError`` if the entry cannot be
        recorded."""
        ...

    async def audit(
        self, kind: str, *, tool: str | None = None, call_id: str | None = None,
        arguments: str | None = None, verdict: str | None = None, reason: str | None = None,
        result: str | None = None, error: str | None = None, duration: float | None = None,
        data: dict[str, Scalar] | None = None,
    ) -> None:
        """Record one audit entry of the run; raises ``AuditError`` if it cannot."""
        ...

    def audit_sync(
        self, kind: str, *, tool: str | None = None, call_id: str | None = None,
        arguments: str | None = None, verdict: str | None = None, reason: str | None = None,
        result: str | None = None, error: str | None = None, duration: float | None = None,
        data: dict[str, Scalar] | None = None,
    ) -> Record | None:
        """Record one audit entry of the run now if it can be done without awaiting
        (not a checkpoint); else return the entry, recorded nothing, for the caller
        to await ``agentcore._audit.record`` with. Raises ``AuditError`` if the sink
        failed."""
        ...

    def audit_now(
        self, kind: str, *, tool: str | None = None, call_id: str | None = None,
        arguments: str | None = None, verdict: str | None = None, reason: str | None = None,
        result: str | None = None, error: str | None = None, duration: float | None = None,
        data: dict[str, Scalar] | None = None,
    ) -> bool:
        """Record one audit entry of the run without waiting if its sink can (not a
        checkpoint, no cancellation check); False when it must be awaited with
        :meth:`audit`. Raises ``AuditError`` if it cannot record."""
        ...

    async def hook_error(self, text: str) -> None:
        """Emit the ``error`` event of a hook that failed."""
        ...

    async def note_interrupt(self) -> None:
        """Emit ``interrupt_received`` once per run, when the loop notices an interrupt."""
        ...

    def abort(self, reason: str = "") -> None:
        """Stop the run now (hard)."""
        ...

    def add_message(self, message: Message) -> None:
        """Append one message to the conversation."""
        ...

    def add_messages(self, messages: Iterable[Message]) -> None:
        """Append messages to the conversation, in order."""
        ...

    def replace_history(self, messages: Sequence[Message]) -> None:
        """Replace the conversation by its shortened version (history budget)."""
        ...

    def add_usage(self, usage: Usage) -> None:
        """Add a model response's usage to the run's."""
        ...

    def count_calls(self, calls: int) -> None:
        """Count tool calls the model asked for (skipped ones too)."""
        ...

    def count_outcome(self, outcome: ToolOutcome) -> None:
        """Count a tool call's denial or error."""
        ...

    def end_as(self, summary: RunSummary) -> None:
        """Set how the run ended (its end may turn it to ``error``)."""
        ...
