"""open_pool: a Pool whose tasks run in a nursery inside the caller's block."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from agentcore.models import load_prices

from .._core._core import CancelCause
from .._cost._budget import Budget
from .._durable._recovery import number_past_file
from .._durable._store import SqliteCheckpoints
from .._specs._history import MAX_HISTORY_BYTES, MAX_HISTORY_MESSAGES, HistoryLimits
from .._specs._spec import Defaults
from .._stream import Stream
from ..mcp._sessions import open_mcp_sessions
from ._lifecycle import run_task
from ._pool import Pool
from ._watchdog import LoopWatchdog, check_threshold

if TYPE_CHECKING:
    from ..mcp import McpServer


def _at_least_one(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"open_pool {name} must be at least 1, not {value!r}")


@asynccontextmanager
async def open_pool(
    *,
    max_concurrent: int = 8,
    max_queued: int = 1024,
    max_depth: int = 8,
    defaults: Defaults | None = None,
    events: Stream | None = None,
    max_children: int = 5,
    children_timeout: float = 30.0,
    loop_watchdog: float | None = None,
    mcp: Iterable[McpServer] = (),
    max_history_messages: int = MAX_HISTORY_MESSAGES,
    max_history_bytes: int = MAX_HISTORY_BYTES,
    budget: Budget | None = None,
    checkpoints: SqliteCheckpoints | None = None,
) -> AsyncIterator[Pool]:
    """Open a :class:`Pool` whose tasks run in a nursery inside this block.

    Leaving the block normally closes the pool and waits for every task;
    leaving it by an exception cancels every task first. Nothing the pool
    starts outlives the block.

    Args:
      max_concurrent: Runs executing at once (a run waiting for its own
        subagent does not count).
      max_queued: Tasks accepted and waiting to start.
      max_depth: The longest AgentPath (1: no delegation).
      defaults: What specs inherit (model, gate, audit sink, agent id).
      events: Where events of tasks with no other destination go; the pool never closes it.
      max_children: Live subagents one run may have, unless its spec says otherwise.
      children_timeout: Seconds a run waits for a child slot before the delegation fails.
      loop_watchdog: Wall-clock seconds the trio thread may go without reaching a
        checkpoint (an async tool blocking the loop); ``None`` (default): unwatched.
        A stall is logged on the ``subagent`` logger (running tool, stack) when seen,
        and sent to ``events`` as one ``event_loop_blocked`` event once the loop runs
        again (see :class:`subagent.LoopStall`). The thread stops with the block.
      mcp: MCP servers whose tools specs may name (:class:`subagent.mcp.McpServer`):
        started at once when the block opens (it waits for each at most its
        ``start_timeout``), shared by every run, closed (and reaped) when it ends.
      max_history_messages: The most messages a submit's ``history`` may hold
        (default 10,000).
      max_history_bytes: The most UTF-8 bytes of text a submit's ``history`` may
        hold (default 16 MiB); see :meth:`Pool.submit`.
      budget: What all the pool's tasks together may spend (a :class:`subagent.Budget`);
        once spent, every running task is stopped and every root task that was
        running fails with :class:`subagent.BudgetExceeded`, and submits are refused.
        With a ``cost`` limit, genai-prices' snapshot is loaded (in a thread) first.
      checkpoints: Where each task's state is committed at every turn boundary,
        before each call of a tool that is not read-only, and when it pauses or
        ends (a :class:`subagent.SqliteCheckpoints`; the caller closes it); then
        ``Pool.recover`` resumes what a crash left unfinished.
    """
    _at_least_one("max_concurrent", max_concurrent)
    _at_least_one("max_queued", max_queued)
    _at_least_one("max_depth", max_depth)
    _at_least_one("max_children", max_children)
    if not (children_timeout > 0 and not math.isnan(children_timeout)):
        raise ValueError(f"open_pool children_timeout must be positive, not {children_timeout!r}")
    check_threshold(loop_watchdog)
    history_limits = HistoryLimits(max_history_messages, max_history_bytes)
    if budget is not None and not isinstance(budget, Budget):
        raise ValueError(f"open_pool budget must be a subagent.Budget, not {type(budget).__name__}")
    inherited = defaults.budget if defaults is not None else None
    if any(b is not None and b.cost is not None for b in (budget, inherited)):
        await load_prices()
    async with open_mcp_sessions(mcp, events) as sessions:
        body_error: BaseException | None = None
        watchdog: LoopWatchdog | None = None
        try:
            async with trio.open_nursery() as nursery:
                pool = Pool(
                    nursery,
                    run_task,
                    max_concurrent=max_concurrent,
                    max_queued=max_queued,
                    max_depth=max_depth,
                    defaults=defaults if defaults is not None else Defaults(),
                    events=events,
                    max_children=max_children,
                    children_timeout=children_timeout,
                    mcp=sessions,
                    history_limits=history_limits,
                    budget=budget,
                )
                pool.checkpoints = checkpoints
                if checkpoints is not None:
                    await number_past_file(pool, checkpoints)
                if loop_watchdog is not None:
                    watchdog = LoopWatchdog(loop_watchdog, pool)
                    watchdog.start(nursery)
                try:
                    yield pool
                except BaseException as exc:
                    body_error = exc
                    # Ctrl-C (and SIGTERM, as the CLI's commands handle it) is named apart.
                    pool._cancel_for(
                        CancelCause.interrupt if isinstance(exc, KeyboardInterrupt)
                        else CancelCause.pool_closed
                    )
                    raise
                finally:
                    pool.close()
        except BaseExceptionGroup as group:
            # The pool's own tasks never raise, so a group holding only the body's
            # exception is that exception: give it back to the caller unwrapped
            # (raised below, outside this handler, so its own cause and context stay).
            if body_error is None or group.exceptions != (body_error,):
                raise
        else:
            return
        finally:
            if watchdog is not None:
                watchdog.stop()
        raise body_error
