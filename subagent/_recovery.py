"""Crash recovery: each task's checkpointer, and resuming what a crash left unfinished.

A pool opened with ``checkpoints=`` gives each task's Agent a checkpointer
(:func:`commit_checkpoint`) that writes the task's row in the
:class:`SqliteCheckpoints`, linked to the run that delegated it by that run's id and
the delegating call's id. :func:`recover` reads the rows back, rebuilds each root
task's tree as a paused tree (a child whose delegating call was in flight is nested
in its parent's state, as a pause nests it) and resumes it with ``Pool.resume``.
A tree that waits for a human (a run of it paused for approval before the crash) is
not resumed: :func:`recover` lists it in :attr:`Recovered.paused`, to be answered
and resumed like any paused run.

Background children (``wait: false``) have rows of their own, tied to their parent's
run the same way. A paused run's row is committed again once they are nested in its
state (:func:`commit_paused`); :func:`recover` ties to each run of a tree, paused or
running, the rows of its background children that its state does not nest (a crash
before that commit), and prefers a child's own row to the state nested in a claimed
resume once that child went on (running: its recovered state; ended: a lost result,
:data:`LOST`, rather than its calls run again).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

import agentcore
from agentcore import MAX_STATE_DEPTH
from agentcore._state import Phase

from ._bgresult import RESULT_PREFIX, audit_entry
from ._checkpoints import CheckpointError, CheckpointRow, SqliteCheckpoints
from ._current import current_task
from ._errors import UnknownAgentError
from ._events import Event, EventKind

#: Seconds the audit entry of an orphan found at recovery may take.
END_BOUND = 5.0

if TYPE_CHECKING:
    from ._spec import Spec
    from ._stream import Stream
    from ._task import Task


class Pool(Protocol):
    """What :func:`recover` uses of a ``subagent.Pool``."""

    events: Stream | None

    @property
    def specs(self) -> dict[str, Spec]: ...

    async def _resume(
        self, state: agentcore.RunState, name: str | None, events: None, *, claim: bool
    ) -> Task: ...


@attrs.frozen
class PausedTree:
    """A tree :func:`recover` found waiting for a human: answer its
    ``state.pending_approvals`` (``state.approve`` / ``state.deny``), then
    ``Pool.resume(state, name=name)``; or store it with ``state.to_json()``.

    Attributes:
      name: The spec its root ran (give it to ``Pool.resume``).
      state: The root's paused state, its children's nested (a root that was still
        running at the crash is in its recovered form, as ``recover`` would resume it).
      checkpoint: The name of the root's last checkpoint (``<run_id>@<seq>``).
    """

    name: str
    state: agentcore.RunState
    checkpoint: str


class Recovered(list["Task"]):
    """What :func:`recover` returns: the Tasks it resumed (it is their list, in the
    order they were first checkpointed) and, in :attr:`paused`, the trees it left
    as they were because they wait for a human's answers."""

    paused: tuple[PausedTree, ...]
    """Each root tree paused for approval (before the crash, or with a subagent
    paused inside a tree that was still running), in the order first checkpointed."""

    def __init__(self, tasks: Iterable[Task] = (), paused: Iterable[PausedTree] = ()) -> None:
        super().__init__(tasks)
        self.paused = tuple(paused)

    def __repr__(self) -> str:
        return f"Recovered({list(self)!r}, paused={list(self.paused)!r})"


async def commit_checkpoint(point: agentcore.Checkpoint) -> None:
    """The checkpointer of every checkpointed task's Agent: writes ``point`` in the
    row of the task whose run it is (``current_task``: the run's own task, or the
    task whose run a tool call runs in), linked to the run that delegated it. A
    checkpoint."""
    task = current_task.get()
    assert task is not None, "a checkpointed Agent runs only in its pool's tasks"
    store = task.pool.checkpoints
    assert store is not None
    await store.write(task.name, *_link(task), point)


async def commit_start(task: Task, agent: agentcore.Agent) -> agentcore.Checkpoint:
    """Commit the ``start`` checkpoint of ``task`` (a new run, not a resumed one) in
    its pool's checkpoints: its opening conversation, before it waits for a slot, so
    that :func:`recover` restarts it from its input if the process dies before its
    run's first checkpoint. Returns it. A checkpoint.

    Raises:
      CheckpointError: it cannot be stored (the task must not run).
    """
    store = task.pool.checkpoints
    assert store is not None
    point = agentcore.start_checkpoint(
        agent.system_prompt, task.input, run_id="/".join(task.path), agent=agent.agent_id,
        path=task.path, history=task.history,
    )
    await store.write(task.name, *_link(task), point)
    return point


def _link(task: Task) -> tuple[str | None, str | None]:
    # The run id of the run that delegated ``task``'s run and the delegating call's id.
    parent = task.parent
    parent_run = parent._run.run_id if parent is not None and parent._run is not None else None
    return parent_run, task.call_id if parent_run is not None else None


async def end_unstarted(task: Task, start: agentcore.Checkpoint, bound: float) -> None:
    """Mark ``task``'s run ended in its pool's checkpoints when it never ran (it was
    cancelled or failed before its run started): a run ends its own row otherwise.
    Shielded, for at most ``bound`` seconds; a failure to store it is dropped (the
    row stays ``running`` and :func:`recover` would restart it). A checkpoint."""
    store = task.pool.checkpoints
    assert store is not None
    ended = agentcore.Checkpoint(agentcore.CheckpointKind.ended, start.state)
    with trio.move_on_after(bound, shield=True):
        with contextlib.suppress(CheckpointError):
            await store.write(task.name, *_link(task), ended)


async def commit_paused(task: Task) -> None:
    """Commit ``task``'s paused state again once its background children are nested
    in it (``_bgstate.keep_background``, after the run's own ``paused`` checkpoint),
    so that its row holds them: a result it had not read is in no other row.
    Shielded, for at most :data:`END_BOUND` seconds; a failure to store it is dropped
    (the row stays as its run left it, and :func:`recover` ties the children's own
    rows to it). A checkpoint."""
    store = task.pool.checkpoints
    assert store is not None and task._run is not None
    point = agentcore.Checkpoint(agentcore.CheckpointKind.paused, task._run.state)
    with trio.move_on_after(END_BOUND, shield=True):
        with contextlib.suppress(CheckpointError):
            await store.write(task.name, *_link(task), point)


async def recover(pool: Pool, store: SqliteCheckpoints) -> Recovered:
    """Resume every root task ``store`` shows unfinished (``running`` at its last
    checkpoint: the process ended without it ending) from its last checkpoint, in
    ``pool``; returns their Tasks in the order they were first checkpointed. A
    checkpoint. A tree that waits for a human (its root paused, or a subagent of it
    paused for approval) is not resumed: it is listed in ``Recovered.paused``.

    Raises:
      CheckpointError: the store cannot be read (see ``SqliteCheckpoints.rows``), or
        a tree is deeper than ``agentcore.MAX_STATE_DEPTH``.
      UnknownAgentError: a run's spec is not in ``pool``.
      agentcore.ResumeError: a recovered state cannot be resumed by its spec.
    """
    rows = await store.rows()
    _check_unique(rows)
    by_call: dict[tuple[str | None, str | None], CheckpointRow] = {
        (r.parent, r.call_id): r for r in rows if r.parent is not None
    }
    # A background child (wait: false) is tied to its parent's run by the parent's
    # run id and the id of the call that started it; that call is not in flight.
    background: dict[str, list[CheckpointRow]] = {}
    for r in rows:
        if r.parent is not None and r.status in ("running", "paused"):
            background.setdefault(r.parent, []).append(r)
    ended = {r.run_id for r in rows if r.status == "ended"}
    for row in rows:
        if row.parent in ended and row.status == "running":
            await _orphan(pool, store, row)
    tasks = []
    paused = []
    for row in rows:
        if row.parent is not None:
            continue
        if row.status == "paused":
            assert row.state is not None
            _nest_paused(pool, row.state, by_call, background, 1)
            paused.append(PausedTree(row.name, row.state, row.checkpoint))
        elif row.status == "running":
            state = _tree(pool, row, by_call, background)
            if state.pending_approvals:
                # A subagent paused for a human before the crash: the tree waits for
                # answers (it stays in the file), it is listed, not resumed.
                paused.append(PausedTree(row.name, state, row.checkpoint))
                continue
            # Not claimed as a resume: a crash before its next checkpoint leaves the
            # same row, recovered again the same way.
            tasks.append(await pool._resume(state, row.name, None, claim=False))
    return Recovered(tasks, paused)


#: The error of a checkpointed background child whose parent had ended at the crash.
ORPHANED = "its parent run had ended before the crash: not resumed"


async def _orphan(pool: Pool, store: SqliteCheckpoints, row: CheckpointRow) -> None:
    # A child still running at the crash whose parent run had ended (a background
    # child, critical or not yet cancelled): reported orphaned (audited in its
    # spec's sink, a task_orphaned event on the pool's stream), then marked ended in
    # the store so that a later recovery does not report it again. An orphan cannot
    # be refused: an entry that cannot be recorded is named in the event's error.
    assert row.state is not None
    spec = pool.specs.get(row.name)
    path = row.state.path
    error = ORPHANED
    if spec is not None and spec.audit is not None:
        failure = await audit_entry(
            spec.audit, EventKind.task_orphaned, END_BOUND, run_id=row.run_id, path=path,
            agent_id=spec.agent_id, call_id=row.call_id, error=ORPHANED,
            data={"agent": row.name, "parent": row.parent or ""},
        )
        if failure is not None:
            error = f"{ORPHANED}; AuditError: {failure}"
    if pool.events is not None:
        pool.events._send_reserved(
            Event(path, EventKind.task_orphaned, None, row.call_id, error=error)
        )
    point = agentcore.Checkpoint(agentcore.CheckpointKind.ended, row.state)
    await store.write(row.name, row.parent, row.call_id, point)


def _background_rows(
    row: CheckpointRow, background: dict[str, list[CheckpointRow]]
) -> list[CheckpointRow]:
    # The background children of ``row``'s run that were not done at the crash.
    return [r for r in background.get(row.run_id, []) if r.call_id not in row.in_flight]


_ByCall = dict[tuple[str | None, str | None], CheckpointRow]


def _tree(
    pool: Pool,
    root: CheckpointRow,
    by_call: _ByCall,
    background: dict[str, list[CheckpointRow]],
    top: int = 1,
) -> agentcore.RunState:
    # Deepest first, with an explicit stack: a child is recovered before its parent.
    # ``top`` is the depth of ``root`` in the tree being recovered.
    order: list[tuple[CheckpointRow, int]] = []
    stack = [(root, top)]
    while stack:
        row, depth = stack.pop()
        if depth > MAX_STATE_DEPTH:
            raise CheckpointError(
                f"checkpoint tree of run {root.run_id[:200]!r} deeper than {MAX_STATE_DEPTH}"
            )
        order.append((row, depth))
        for call_id in row.in_flight:
            child = by_call.get((row.run_id, call_id))
            if child is not None and child.status == "running":
                stack.append((child, depth + 1))
        for child in _background_rows(row, background):
            if child.status == "running":
                stack.append((child, depth + 1))
    recovered: dict[str, agentcore.RunState] = {}
    for row, depth in reversed(order):
        spec = pool.specs.get(row.name)
        if spec is None:
            raise UnknownAgentError(row.name, tuple(sorted(pool.specs)))
        assert row.state is not None
        _check_row(row, row.state, spec)
        children = {}
        for call_id in row.in_flight:
            child = by_call.get((row.run_id, call_id))
            if child is None:
                continue
            if child.status == "running":
                children[call_id] = recovered[child.run_id]
            elif child.status == "paused" and child.state is not None:
                _nest_paused(pool, child.state, by_call, background, depth + 1)
                children[call_id] = child.state
        repeatable = {t.name for t in spec.tools if agentcore.is_idempotent(t)}
        agentcore.recover_calls(row.state, set(row.in_flight), repeatable, children,
                                row.checkpoint)
        rows = _background_rows(row, background)
        background.pop(row.run_id, None)  # taken (see _nest_paused)
        _nest(pool, row.state, rows, recovered, by_call, background, depth)
        recovered[row.run_id] = row.state
    return recovered[root.run_id]


#: The error result of a background child nested in a claimed resume whose own run
#: had ended at the crash: resuming it again would repeat its calls.
LOST = "it ended after its tree was resumed, before the crash; its result was lost"


def _nest(
    pool: Pool,
    state: agentcore.RunState,
    rows: list[CheckpointRow],
    recovered: dict[str, agentcore.RunState],
    by_call: _ByCall,
    background: dict[str, list[CheckpointRow]],
    depth: int,
) -> None:
    # Tie the background children's own rows ``rows`` (running or paused, tied to
    # ``state``'s run) to ``state``: each is resumed as a background child of it
    # (Pool.resume), its result delivered to it. A child ``state`` nests already (a
    # paused row committed again with them, a claimed resume) is kept, unless its own
    # row went on: running (it was resumed; ``recovered`` holds it) replaces it,
    # ended makes it a lost result (its calls are not repeated).
    delegated = {p.call.id for p in state.pending
                 if p.status is agentcore.CallStatus.delegated}
    nested = {c.background.call_id: k for k, c in enumerate(state.children)
              if c.background is not None and not c.background.ended}
    delivered = {c.background.call_id for c in state.children
                 if c.background is not None and c.background.ended}
    for k in nested.values():
        kid = state.children[k]
        own = by_call.get((state.run_id, kid.background.call_id if kid.background else ""))
        if own is not None and own.status == "ended":
            state.children[k] = _lost(kid)
        elif own is None or own.status == "paused":
            _nest_paused(pool, kid, by_call, background, depth + 1)
    for child in rows:
        if child.call_id in delegated or child.call_id in delivered:
            continue  # a delegated call's child (nested by its call), or a kept result
        found = recovered.get(child.run_id) if child.status == "running" else child.state
        if found is None:
            continue
        at = nested.get(child.call_id or "")
        if at is not None and child.status != "running":
            continue  # nested as its row holds it
        if child.status == "paused":
            _nest_paused(pool, found, by_call, background, depth + 1)
        found.background = agentcore.BackgroundChild(child.call_id or "", child.name)
        if at is None:
            state.children.append(found)
        else:
            state.children[at] = found


def _nest_paused(
    pool: Pool,
    state: agentcore.RunState,
    by_call: _ByCall,
    background: dict[str, list[CheckpointRow]],
    depth: int,
) -> None:
    # A paused state (a paused row's, or nested in one) at ``depth``: tie to it, and
    # to the paused states nested in it, the background rows of their runs (a crash
    # before a paused run's row was committed again with its background children).
    if depth > MAX_STATE_DEPTH:
        raise CheckpointError(
            f"checkpoint tree of run {state.run_id[:200]!r} deeper than {MAX_STATE_DEPTH}"
        )
    for kid in state.children:
        if kid.background is None and kid.paused:
            _nest_paused(pool, kid, by_call, background, depth + 1)
    # Taken: a run id nested twice (edited) cannot have its rows recovered twice.
    rows = background.pop(state.run_id, [])
    recovered = {r.run_id: _tree(pool, r, by_call, background, depth + 1)
                 for r in rows if r.status == "running"}
    _nest(pool, state, rows, recovered, by_call, background, depth)


def _lost(kid: agentcore.RunState) -> agentcore.RunState:
    # The kept result, an error, of a nested background child whose run had ended.
    assert kid.background is not None
    mark = kid.background
    error = f"subagent {'/'.join(kid.path)}: {LOST}"
    body = {"agent": mark.name, "path": list(kid.path), "error": error}
    ended = agentcore.RunState.begin([], run_id=kid.run_id, agent=kid.agent, path=kid.path,
                                     input=kid.input)
    ended.phase = Phase.ended
    ended.background = agentcore.BackgroundChild(
        mark.call_id, mark.name, RESULT_PREFIX + json.dumps(body), None, error)
    return ended


def _check_unique(rows: list[CheckpointRow]) -> None:
    # One row per run id (the table's key; a hand-made table may lack it): a run id
    # stored twice makes the parent links a graph whose paths grow as 2**depth.
    seen: set[str] = set()
    for row in rows:
        if row.run_id in seen:
            raise CheckpointError(f"the checkpoints hold run {row.run_id[:200]!r} twice "
                                  "(edited or damaged); refusing to recover them")
        seen.add(row.run_id)


def _check_row(row: CheckpointRow, state: agentcore.RunState, spec: Spec) -> None:
    # The row's name and in-flight ids are outside the state's digest: they must agree
    # with it, else an edit there repeats a call the never-repeat rule holds back.
    where = f"checkpoint of run {row.run_id[:200]!r}"
    if state.agent != spec.agent_id:
        raise CheckpointError(
            f"{where} names spec {row.name[:200]!r}, but its state is a run of agent "
            f"{state.agent[:200]!r}; refusing to recover it"
        )
    if row.status != "running":
        return
    if not (row.claimed and row.parent is None):
        # A turn, call or start snapshot (agentcore._checkpoint.snapshot) holds only
        # calls without a result, ``waiting``, and no nested run: an answered call
        # there (re-digested by hand) would run without its gate.
        for p in state.pending:
            if p.status is not agentcore.CallStatus.waiting:
                raise CheckpointError(
                    f"{where} holds call {p.call.id[:200]!r} as {p.status.value}, which "
                    "a running checkpoint never does (edited or damaged); refusing to "
                    "recover it"
                )
        if state.children:
            raise CheckpointError(
                f"{where} holds nested runs, which a running checkpoint never does "
                "(edited or damaged); refusing to recover it"
            )
    elif row.in_flight and any(
        p.status is not agentcore.CallStatus.waiting for p in state.pending
    ):
        # A claimed resume's answered state is stored with nothing in flight.
        raise CheckpointError(
            f"{where} holds answered calls and calls in flight (edited or damaged); "
            "refusing to recover it"
        )
    waiting = [p.call.id for p in state.pending if p.status is agentcore.CallStatus.waiting]
    if waiting and len(waiting) == len(state.pending) and waiting[0] not in row.in_flight:
        # A ``call`` checkpoint is taken just before its call, the first without a result.
        # (A state with answered calls is a claimed resume, ``SqliteCheckpoints.claim``:
        # none of its calls started, nothing is in flight.)
        raise CheckpointError(
            f"{where} does not match its state: call {waiting[0][:200]!r} has no result "
            "and is not among its in-flight calls (edited or damaged); refusing to recover it"
        )
