"""Calling hooks: one hook method within the hook timeout, and a chain of interceptors."""

from __future__ import annotations

import reprlib
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from .._errors import describe
from .._hookset import BoundHook, Denial, HookAction, HookResult

if TYPE_CHECKING:
    from ._port import RunPort

T = TypeVar("T")


async def _attempt(run: RunPort, hook: BoundHook, args: tuple[Any, ...]) -> tuple[Any, str | None]:
    # One hook call within the hook timeout: what it returned, or what went wrong
    # ("failed: TypeName: message" or "timed out after 5s").
    timeout = run.agent.hook_timeout
    try:
        with trio.move_on_after(timeout):
            return await hook.fn(*args), None
    except Exception as exc:
        return None, f"failed: {describe(exc)}"
    return None, f"timed out after {timeout:g}s"


async def call_hook(run: RunPort, hook: BoundHook, *args: Any, report: bool = True) -> Any:
    """Call one hook method within the hook timeout. A checkpoint.

    Returns what it returned, or None when it failed or timed out (after the
    ``error`` event saying so, unless ``report`` is false).
    """
    result, failure = await _attempt(run, hook, args)
    if failure is not None and report:
        await run.hook_error(f"hook {hook.name!r} {hook.point} {failure}; skipped")
    return result


async def intercept(
    run: RunPort,
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
            # reprlib: bounded in length and depth, and a repr that raises (a
            # RecursionError on a deep answer) gives a placeholder instead.
            failure = f"returned {_ANSWER.repr(result)}, which it may not"
        what = f"hook {hook.name!r} {hook.point} {failure}"
        if may_deny:
            await run.hook_error(f"{what}; the call is denied")
            return value, Denial(what, failed=True)
        await run.hook_error(f"{what}; {'skipped' if result is None else 'ignored'}")
    return value, None


#: How a wrong answer is quoted: at most ~200 characters and 6 levels deep.
_ANSWER = reprlib.Repr()
_ANSWER.maxstring = _ANSWER.maxother = 200
