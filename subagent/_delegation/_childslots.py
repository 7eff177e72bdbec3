"""The delegation tools' entry to the pool's trio shell (used by ``_delegation`` and
``_results``): lending a run's slot, claiming a fan-out slot, submitting a child and
following it. Part of the shell, kept apart so that ``_pool.py`` stays small: each
function is one step of :class:`subagent.Pool` or of its core.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import agentcore
from agentcore import AgentPath

if TYPE_CHECKING:
    from .._pool._pool import Pool
    from .._pool._task import Task

_T = TypeVar("_T")


async def lend_slot(pool: Pool, task: Task, fn: Callable[[], Awaitable[_T]]) -> _T:
    """Await ``fn()`` while ``task`` lends its concurrency slot (see
    ``subagent._delegation._tool.lend_slot``). A checkpoint."""
    return await pool._lend_slot(task, fn)


async def claim_child(pool: Pool, caller: Task, agent: str) -> None:
    """Claim a fan-out slot of ``caller``'s run for a child of agent ``agent``: at once
    if one is free (not a checkpoint then), else waiting at most the pool's
    ``children_timeout`` with ``caller``'s concurrency slot lent. Give it to
    :func:`submit_child` (or back with :func:`release_child`).

    Raises:
      MaxChildrenError: none was freed in time.
    """
    if not pool._core.claim_fanout(caller._node):
        await pool._claim_child(caller, agent, True)


def release_child(pool: Pool, caller: Task) -> None:
    """Give back a fan-out slot claimed by :func:`claim_child` and not used."""
    pool._apply(pool._core.release_fanout(caller._node))


def accept_child(
    pool: Pool, caller: Task, name: str, input: str, call_id: str | None, background: bool,
    *, resume: agentcore.RunState | None = None,
) -> Task:
    """Accept a child of ``caller`` holding the fan-out slot claimed for it (with
    ``resume``, continuing that paused run); not a checkpoint. Raises
    ``trio.WouldBlock`` if the queue is full."""
    return pool._accept(name, input, caller.path, None, call_id, caller, background,
                        resume=resume)


async def submit_child(
    pool: Pool,
    caller: Task | None,
    parent_path: AgentPath,
    name: str,
    input: str,
    call_id: str | None,
    background: bool = False,
    *,
    resume: agentcore.RunState | None = None,
) -> Task:
    """Submit a child under ``parent_path`` for a delegation tool; with ``caller``, it
    holds the fan-out slot claimed for it; with ``resume``, it continues that paused
    run. A checkpoint (waits while the queue is full)."""
    return await pool._submit(
        name, input, parent_path, None, call_id, caller, background, resume=resume
    )


def await_child(pool: Pool, caller: Task, child: Task) -> None:
    """``caller``'s lending call waits for ``child`` alone (see PoolCore.run_ended)."""
    pool._core.await_child(caller._node, child._node)


def stop_awaiting(pool: Pool, caller: Task, child: Task) -> None:
    """``caller``'s call waiting for ``child`` ended."""
    pool._core.stop_awaiting(caller._node, child._node)


def to_background(pool: Pool, caller: Task, child: Task) -> None:
    """``child`` (waited for by ``caller`` until now) goes on in the background."""
    pool._core.to_background(caller._node, child._node)
