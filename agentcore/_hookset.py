"""The values of the hook machinery: what an interceptor answers, and an agent's hooks
bound per method. No I/O (see ``_hooks`` for what hooks are, ``_hookcall`` for calling them).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

import attrs

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
