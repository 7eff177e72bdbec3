"""Hooks: objects that observe a run's events or intercept its model and tool calls.

A hook is any object with one or more of the methods of :class:`EventObserver`,
:class:`ModelInterceptor` and :class:`ToolInterceptor` (no base class): the loop
calls whichever of them it has. Pass hooks as ``Agent(hooks=[...])``.

Order: hooks run one after another in ascending ``priority`` (an optional int
attribute, default 0; lower runs first), hooks of equal priority in the order
given. An interceptor sees the value as changed by the hooks before it.

Each call is bounded by the agent's ``hook_timeout`` (default 5 s). A hook that
does not return in time, or raises, is skipped: the run emits an ``error`` event
whose text names the hook, the method and the timeout (or the exception), and
goes on as if the hook had returned None. ``trio.Cancelled`` is never swallowed.

Except ``before_tool``: a policy hook fails closed, like the gate. A
``before_tool`` that raises, overruns ``hook_timeout`` or gives an answer it may
not give denies the call: the ``error`` event says so, a ``gate_decision`` event
and audit entry record the denial (verdict ``deny``), and the model sees
``denied: hook '<name>' before_tool <what went wrong>``. The hooks after it are
not called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ._events import Event
from ._hookset import HookResult
from ._messages import ModelRequest, ModelResponse, ToolCall

if TYPE_CHECKING:
    from ._run._run import Run
    from ._tools._tools import ToolOutcome


class EventObserver(Protocol):
    """A hook that sees every event of the run, after the run's own event destination."""

    async def on_event(self, event: Event) -> None: ...


class ModelInterceptor(Protocol):
    """A hook around each model call (retries included).

    ``before_model`` may replace the request (what is sent, not the run's history)
    or abort; ``after_model`` may replace the response or abort.
    """

    async def before_model(
        self, run: Run, request: ModelRequest
    ) -> HookResult[ModelRequest] | None: ...

    async def after_model(
        self, run: Run, request: ModelRequest, response: ModelResponse
    ) -> HookResult[ModelResponse] | None: ...


class ToolInterceptor(Protocol):
    """A hook around each tool call.

    ``before_tool`` runs after ``tool_start`` and before the argument check and the
    gate; it may replace the call (its id is kept), deny it, or abort. It fails
    closed: raising, overrunning ``hook_timeout`` or an answer it may not give
    denies the call. ``after_tool`` may replace the outcome or abort; one that fails
    is skipped.
    """

    async def before_tool(self, run: Run, call: ToolCall) -> HookResult[ToolCall] | None: ...

    async def after_tool(
        self, run: Run, call: ToolCall, outcome: ToolOutcome
    ) -> HookResult[ToolOutcome] | None: ...
