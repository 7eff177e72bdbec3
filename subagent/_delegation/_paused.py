"""Background children in a paused tree: what a pause keeps of them, and what a resume
does with it (issue 20, item 1).

When a tree pauses (a gate deferred a call anywhere in it), a run's background
children (``wait: false`` delegations) whose result it has not read become part of
its ``RunState``: nested in ``RunState.children`` after the delegated calls'
states, each marked ``background`` (``agentcore.BackgroundChild``). A background
child that is still running is **paused at its next safe point**, like the rest of
the tree (``Run.pause``: the calls it started finish, nothing new starts) rather
than left to finish: a human's answer may take days, and a pause should not wait on
unrelated work of unbounded length, nor cancel it and lose it. Its paused state is
nested (with its own background children, recursively). A child that had ended is
kept with the message that delivers its result. A background child whose own gate
defers a call pauses its parent's run the same way, so the tree pauses to the root.

On ``Pool.resume`` each kept result is offered to the resumed parent's inbox and
delivered once (``result_delivered``), and each paused child is resumed as a
background child of the resumed parent: every background result is still delivered
or orphaned exactly once, across the pause. Tasks and states here belong to the
pool's shell (trio); the parent task owns its kept results until its run reads them.
The keeping itself is a step of the parent's end: ``_pool._ending.keep_background``.
"""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol, cast

import agentcore
from agentcore import BackgroundChild, InboxMessage, Message, RunState
from agentcore._run._run import _current_run
from agentcore._run._state import Phase

from .._core._core import TaskStatus
from .._reply import RESULT_PREFIX, report_delivery

if TYPE_CHECKING:
    from .._pool._pool import Pool
    from .._pool._task import Task

class StartChild(Protocol):
    """``_delegation.start_child``: starts a background child (passed in, so that
    this module does not depend on the delegation tool's)."""

    async def __call__(self, pool: Pool, caller: Task, agent: str, text: str,
                       call_id: str | None, *, resume: RunState | None = None) -> Task: ...


# Tasks asked to pause before their run was made (read when it is), and the kept
# results each resumed task has not read yet (its run's inbox holds their messages).
_pause_asked: weakref.WeakSet[Task] = weakref.WeakSet()
_kept: weakref.WeakKeyDictionary[Task, list[RunState]] = weakref.WeakKeyDictionary()


def ask_pause(task: Task) -> None:
    """Ask ``task``'s run to pause at its next safe point (at once when it starts, if
    it has not). Not a checkpoint."""
    if task._run is not None:
        task._run.pause()
    else:
        _pause_asked.add(task)


def keeps_result(run: agentcore.Run, child: Task) -> bool:
    """Whether the result of ``child`` (a background child that has ended) is kept
    for its parent's paused state instead of being offered to ``run`` (the parent's
    run): the parent's run ended paused, or ``child`` paused while ``run`` runs (the
    run is then asked to pause too: the tree pauses to the root). Not a checkpoint."""
    if run.ended:
        return run.state.paused
    if child.status is TaskStatus.paused:
        run.pause()
        return True
    return False


def pause_asked(task: Task) -> bool:
    """Whether ``task`` was asked to pause before its run was made. Not a checkpoint."""
    return bool(_pause_asked) and task in _pause_asked


def take_kept(task: Task) -> list[RunState]:
    """The kept results ``task``'s run did not read (it has ended). Not a checkpoint."""
    return _kept.pop(task, [])


def has_kept(task: Task) -> bool:
    """Whether ``task`` holds kept results not read yet. Not a checkpoint."""
    return bool(_kept) and bool(_kept.get(task))


def kept_count(task: Task) -> int:
    """How many kept results ``task`` holds, not read yet. Not a checkpoint."""
    return len(_kept.get(task, ())) if _kept else 0


def take_background(task: Task) -> Sequence[RunState]:
    """Take the background children out of the state ``task`` resumes (the pool starts
    them again: the run resumes the rest); an empty tuple when there are none (the
    task's runner holds it while its run is parked). Not a checkpoint."""
    state = task._resume
    if state is None or not any(c.background is not None for c in state.children):
        return ()
    taken = [c for c in state.children if c.background is not None]
    state.children = [c for c in state.children if c.background is None]
    return taken


def _tree(state: RunState) -> Iterator[RunState]:
    stack = [state]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


async def start_background(
    task: Task, run: agentcore.Run, taken: Sequence[RunState], start_child: StartChild
) -> None:
    """Before ``task``'s run runs: apply a pause asked for before it was made, offer
    the kept results ``taken`` to its inbox, and resume the paused ones as background
    children of ``task`` with ``start_child`` (``_delegation.start_child``). A
    checkpoint when there are paused ones (a fan-out slot or room in the queue may
    be waited for, with ``task``'s slot lent).

    A paused child that cannot be started again (its fan-out stayed full, the pool
    closed) becomes a kept result with that error: it is delivered or orphaned once.
    """
    if task in _pause_asked:
        _pause_asked.discard(task)
        run.pause()
    for state in taken:
        mark = state.background
        assert mark is not None
        if not mark.ended:
            # Its own run now: its rows hold it unmarked (a stored state's top never
            # is marked; a paused row that was could not be recovered).
            state.background = None
            # Started from within the parent's run, as its tool call did: the parent's
            # gate bounds the child's (see Spec.delegated).
            token = _current_run.set(run)
            try:
                pool = cast("Pool", task.pool)
                await start_child(pool, task, mark.name, state.input, mark.call_id,
                                  resume=state)
                continue
            except Exception as exc:
                error = f"subagent {'/'.join(state.path)} could not be resumed: {exc}"
                body = {"agent": mark.name, "path": list(state.path), "error": error}
                mark = BackgroundChild(mark.call_id, mark.name,
                                       RESULT_PREFIX + json.dumps(body), None, error)
                state = RunState.begin([], run_id=state.run_id, agent=state.agent,
                                       path=state.path, input=state.input)
                state.phase = Phase.ended
                state.background = mark
            finally:
                _current_run.reset(token)
        assert mark.result is not None
        _kept.setdefault(task, []).append(state)
        read = functools.partial(_delivered_kept, task, state)
        run.put(InboxMessage(Message("user", mark.result), None, on_read=read, preempts=False))


async def _delivered_kept(parent: Task, state: RunState) -> None:
    # Awaited by the parent run's loop right after it appended the kept result's
    # message: as _pool._ending's _delivered, from the stored values.
    mark = state.background
    assert mark is not None
    await report_delivery(parent, mark.call_id, mark.name, state.path, mark.output,
                          mark.error, functools.partial(_unkeep, parent, state))


def _unkeep(parent: Task, state: RunState) -> None:
    # The kept result ``state`` is read: ``parent`` holds it no more.
    kept = _kept.get(parent, [])
    if state in kept:
        kept.remove(state)


