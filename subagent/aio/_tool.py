"""Tools made of asyncio coroutine functions."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import agentcore

from ._host import current_host

__all__ = ["tool"]

P = ParamSpec("P")
R = TypeVar("R")


def tool(fn: Callable[P, Awaitable[R]] | None = None, /, **options: Any) -> Any:
    """Make an agentcore tool of an asyncio coroutine function: a decorator, with
    :func:`agentcore.tool`'s options (``name``, ``description``, ``read_only``,
    ``idempotent``, ``liveness``).

    Each call runs the coroutine as an asyncio task on the loop of the pool's
    :func:`open_pool`, and is cancelled with its call (``tool_timeout``, the run's
    end): the asyncio task is cancelled and given :data:`TOOL_CANCEL_GRACE` seconds.
    Such a tool works only in a pool opened by :func:`open_pool`; elsewhere its call
    fails with a ``RuntimeError`` result.
    """

    def make(fn: Callable[P, Awaitable[R]]) -> agentcore.TypedTool[P, R]:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"subagent.aio.tool takes an async def function, not {fn!r}")

        @functools.wraps(fn)
        async def on_host(*args: P.args, **kwargs: P.kwargs) -> R:
            host = current_host()
            if host is None or host.ended:
                raise RuntimeError("an asyncio tool runs only in a pool opened by "
                                   "subagent.aio.open_pool")
            return await host.on_loop(fn(*args, **kwargs))

        made: agentcore.TypedTool[P, R] = agentcore.tool(on_host, **options)  # type: ignore[arg-type]
        return made

    return make if fn is None else make(fn)

