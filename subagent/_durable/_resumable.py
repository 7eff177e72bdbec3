"""What ``Pool.resume`` checks before it queues a paused run (agentcore's own check,
on the names a spec binds), and its claim in the checkpoints, undone if the run is
not queued (:func:`claim_and_submit`)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Awaitable, Callable, Container, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

import attrs
import trio

from agentcore import AgentPath, RunState
from agentcore._run._resume import check_resumable as check_resumable

from .._errors import UnknownAgentError
from ._claims import already_resumed, resume_key
from ._store import CheckpointError, SqliteCheckpoints

if TYPE_CHECKING:
    from .._specs._spec import Spec

#: Seconds the undoing of a claim whose resume was not queued may take (shielded).
RELEASE_BOUND = 5.0

T = TypeVar("T")


@attrs.frozen
class Names:
    """A spec's agent id and tools by name, as ``check_resumable`` reads an Agent."""

    agent_id: str
    tools_by_name: Mapping[str, object]
    #: The pool starts a state's background children again (see ``_delegation._paused``).
    takes_background: bool = True


def _tree(state: RunState) -> Iterator[RunState]:
    stack = [state]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


class Numbered(Protocol):
    """What :func:`number_past` uses of a ``subagent.Pool``: the numbers of its tasks'
    path segments (``<name>/<number>``)."""

    _numbers: itertools.count[int]


#: Digits of the largest path number :func:`number_past` reads (a longer one, from an
#: edited file, is not a number this pool could have given).
MAX_DIGITS = 9


def number_past(pool: Numbered, run_ids: Iterable[str]) -> None:
    """Number ``pool``'s next tasks past every task number in ``run_ids`` (the run
    ids of resumed or recovered runs, and of the rows in their checkpoint file), so
    that a run started after a resume (a recovered run delegating again) never gets
    the run id of a run it continues, or of a row of its file. Not a checkpoint."""
    high = 0
    for run_id in run_ids:
        for part in run_id.split("/")[1::2]:
            if part.isdigit() and len(part) <= MAX_DIGITS:
                high = max(high, int(part))
    first = next(pool._numbers)
    pool._numbers = itertools.count(max(first, high + 1))


def resumed_path(live: Container[AgentPath], parent_path: AgentPath,
                 resume: RunState) -> AgentPath | None:
    """The path of the task that resumes ``resume`` under ``parent_path``: the run's
    own path, when it is under ``parent_path`` and no live task of the pool (``live``)
    has it, so that the task and the runs it starts continue the run's paths; else
    ``None`` (the pool numbers a new one). Not a checkpoint."""
    path = resume.path
    if path and path[:-1] == parent_path and path not in live:
        return path
    return None


def run_ids(state: RunState) -> Iterator[str]:
    """The run ids of ``state``'s tree (itself and every nested child)."""
    return (node.run_id for node in _tree(state))


def check_background(specs: Mapping[str, Spec], state: RunState) -> None:
    """Raise unless every background child in ``state``'s tree can be started again
    in a pool with ``specs``. Not a checkpoint.

    Raises:
      UnknownAgentError: a background child's spec name is not registered.
      agentcore.ResumeError: a paused background child's spec cannot resume it.
    """
    for node in _tree(state):
        mark = node.background
        if mark is None:
            continue
        spec = specs.get(mark.name)
        if spec is None:
            raise UnknownAgentError(mark.name[:200], tuple(sorted(specs)))
        if not mark.ended:
            check_resumable(Names(spec.agent_id, {t.name: t for t in spec.tools}), node)


def bind(specs: Mapping[str, Spec], state: RunState, name: str | None) -> str:
    """The name of the spec ``state`` resumes under (``name``, or the one spec whose
    agent id is the state's), after ``Pool.resume``'s checks of the state against
    the specs. Not a checkpoint.

    Raises:
      UnknownAgentError: no such spec (or several share the state's agent id).
      ResumeError: the state cannot be resumed by that spec (see check_resumable).
    """
    name = spec_name(specs, state, name)
    spec = specs[name]
    check_resumable(Names(spec.agent_id, {t.name: t for t in spec.tools}), state)
    check_background(specs, state)
    return name


def spec_name(specs: Mapping[str, Spec], state: RunState, name: str | None) -> str:
    """The name of the spec ``state`` is bound to: ``name``, or the one spec whose
    agent id is the state's. Not a checkpoint.

    Raises:
      UnknownAgentError: no such spec (or several share the state's agent id).
    """
    found = [s.name for s in specs.values() if s.agent_id == state.agent]
    if name is None and len(found) != 1:
        raise UnknownAgentError(state.agent, tuple(sorted(specs)))
    name = found[0] if name is None else name
    if name not in specs:
        raise UnknownAgentError(name, tuple(sorted(specs)))
    return name


async def claim_and_submit(
    store: SqliteCheckpoints, name: str, state: RunState, submit: Callable[[], Awaitable[T]]
) -> T:
    """Claim the resume of ``state`` in ``store`` (``SqliteCheckpoints.take_claim``),
    then ``submit()``; if that raises (cancelled while the queue is full, the pool
    closed), the claim is undone (``unclaim``: shielded, for at most
    :data:`RELEASE_BOUND` seconds; a failure to store it is dropped, the state then
    stays claimed) before the error propagates, so the same state can be resumed
    again and a recovery does not run it. A checkpoint.

    Raises:
      AlreadyResumedError: ``store`` records this state as resumed already.
      CheckpointError: the claim cannot be stored (nothing is queued).
    """
    claim = await store.take_claim(name, state, resume_key(state))
    if claim is None:
        raise already_resumed(state)
    try:
        return await submit()
    except BaseException:
        with trio.move_on_after(RELEASE_BOUND, shield=True):
            with contextlib.suppress(CheckpointError):
                await store.unclaim(claim)
        raise
