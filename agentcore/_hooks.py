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

import enum
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import attrs
import trio

from ._errors import describe
from ._events import Event
from ._messages import ModelRequest, ModelResponse, ToolCall

if TYPE_CHECKING:
    from ._run import Run
    from ._toolcall import ToolOutcome

T = TypeVar("T")


class HookAction(enum.Enum):
    """What an interceptor asks the loop to do."""

    proceed = "continue"
    """Go on with the value unchanged."""
    replace = "replace"
    """Go on with ``HookResult.value`` instead."""
    deny = "deny"
    """Do not run the tool call (``before_tool`` only); the model sees ``denied: <reason>``."""
    abort = "abort"
    """End the run now, exactly like :meth:`Run.abort`."""


@attrs.frozen(slots=True)
class HookResult(Generic[T]):
    """An interceptor's answer. Returning ``None`` is the same as :meth:`proceed`.

    Build one with :meth:`proceed`, :meth:`replace`, :meth:`deny` or :meth:`abort`.
    An answer that its method may not give (``deny`` outside ``before_tool``, a
    replacement of the wrong type) is ignored with an ``error`` event.
    """

    action: HookAction
    value: T | None = None
    reason: str = ""

    @classmethod
    def proceed(cls) -> HookResult[Any]:
        """Go on unchanged."""
        return _PROCEED

    @classmethod
    def replace(cls, value: T) -> HookResult[T]:
        """Go on with ``value`` (a request, response, call or outcome like the one given)."""
        return cls(HookAction.replace, value)

    @classmethod
    def deny(cls, reason: str) -> HookResult[Any]:
        """Refuse the tool call with ``reason`` (``before_tool`` only).

        ``before_tool`` fails closed: if it raises or overruns the agent's
        ``hook_timeout`` instead of answering, the call is denied too (with an
        ``error`` event and an audited ``gate_decision`` naming the failure), so a
        policy hook that crashes on odd input never lets the call through.
        """
        return HookResult(HookAction.deny, None, reason)

    @classmethod
    def abort(cls, reason: str) -> HookResult[Any]:
        """Abort the run (hard): it ends ``aborted``, rolled back to the turn's start."""
        return HookResult(HookAction.abort, None, reason)


_PROCEED: HookResult[Any] = HookResult(HookAction.proceed)


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


def hook_name(hook: object) -> str:
    """A hook's ``name`` attribute, or its class name."""
    name = getattr(hook, "name", None)
    return name if isinstance(name, str) and name else type(hook).__name__


@attrs.frozen(slots=True)
class BoundHook:
    """One hook method the loop calls: the hook's name, the method's name, the method."""

    name: str
    point: str
    fn: Callable[..., Awaitable[Any]]


def _bind(hooks: Sequence[object], point: str) -> tuple[BoundHook, ...]:
    bound = []
    for hook in hooks:
        fn = getattr(hook, point, None)
        if callable(fn):
            bound.append(BoundHook(hook_name(hook), point, fn))
    return tuple(bound)


@attrs.frozen(slots=True, init=False)
class HookSet:
    """An agent's hooks, sorted by priority, per method. Empty tuples cost the loop nothing."""

    on_event: tuple[BoundHook, ...]
    before_model: tuple[BoundHook, ...]
    after_model: tuple[BoundHook, ...]
    before_tool: tuple[BoundHook, ...]
    after_tool: tuple[BoundHook, ...]

    def __init__(self, hooks: Sequence[object]) -> None:
        ordered = sorted(hooks, key=lambda h: getattr(h, "priority", 0)) if hooks else ()
        for point in _POINTS:
            object.__setattr__(self, point, _bind(ordered, point) if hooks else ())


_POINTS = ("on_event", "before_model", "after_model", "before_tool", "after_tool")
NO_HOOKS = HookSet(())


@attrs.frozen(slots=True)
class Denial:
    """Why a ``before_tool`` hook stopped a tool call.

    ``failed`` is true when the hook did not answer properly (it raised, overran
    ``hook_timeout`` or gave an answer it may not): a policy hook fails closed.
    """

    reason: str
    failed: bool = False


async def _attempt(run: Run, hook: BoundHook, args: tuple[Any, ...]) -> tuple[Any, str | None]:
    # One hook call within the hook timeout: what it returned, or what went wrong
    # ("failed: TypeName: message" or "timed out after 5s").
    timeout = run.agent.hook_timeout
    try:
        with trio.move_on_after(timeout):
            return await hook.fn(*args), None
    except Exception as exc:
        return None, f"failed: {describe(exc)}"
    return None, f"timed out after {timeout:g}s"


async def call_hook(run: Run, hook: BoundHook, *args: Any, report: bool = True) -> Any:
    """Call one hook method within the hook timeout. A checkpoint.

    Returns what it returned, or None when it failed or timed out (after the
    ``error`` event saying so, unless ``report`` is false).
    """
    result, failure = await _attempt(run, hook, args)
    if failure is not None and report:
        await run.hook_error(f"hook {hook.name!r} {hook.point} {failure}; skipped")
    return result


async def intercept(
    run: Run,
    hooks: tuple[BoundHook, ...],
    args: tuple[Any, ...],
    value: T,
    kind: type[T],
    *,
    may_deny: bool = False,
) -> tuple[T, Denial | None]:
    """Pass ``value`` through ``hooks`` in order. A checkpoint.

    Each hook is called with ``*args, value``. Returns the final value and, when a
    hook denied, the :class:`Denial` (the remaining hooks are not called). With
    ``may_deny`` (``before_tool``) a hook that fails, times out or gives an answer
    it may not denies too (fail closed); otherwise it is skipped. Either way an
    ``error`` event says so. An abort cancels the run (see :meth:`Run.abort`) and so
    raises ``trio.Cancelled``.
    """
    for hook in hooks:
        result, failure = await _attempt(run, hook, (*args, value))
        if failure is None and result is None:
            continue
        if failure is None:
            action = result.action if isinstance(result, HookResult) else None
            if action is HookAction.proceed:
                continue
            if action is HookAction.replace and isinstance(result.value, kind):
                value = result.value
                continue
            if action is HookAction.deny and may_deny:
                return value, Denial(result.reason)
            if action is HookAction.abort:
                run.abort(f"hook {hook.name!r} {hook.point}: {result.reason}")
                await trio.lowlevel.checkpoint()
                continue
            failure = f"returned {result!r}, which it may not"
        what = f"hook {hook.name!r} {hook.point} {failure}"
        if may_deny:
            await run.hook_error(f"{what}; the call is denied")
            return value, Denial(what, failed=True)
        await run.hook_error(f"{what}; {'skipped' if result is None else 'ignored'}")
    return value, None
