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
import itertools
import weakref
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

import agentcore

from .._current import current_task
from .._errors import SubagentError
from .._events import Event, EventKind
from .._reply import audit_entry
from ._checks import _check_row as _check_row
from ._checks import _check_unique
from ._resumable import number_past
from ._store import CheckpointError, CheckpointRow, SqliteCheckpoints, UnreadRow
from ._tree import _nest_paused, _tree

#: Seconds the audit entry of an orphan found at recovery may take.
END_BOUND = 5.0

if TYPE_CHECKING:
    from .._core._core import PoolCore
    from .._pool._task import Task
    from .._specs._spec import Spec
    from .._stream import Stream


class Pool(Protocol):
    """What :func:`recover` uses of a ``subagent.Pool``."""

    events: Stream | None
    _numbers: itertools.count[int]
    _started: StartedRuns

    @property
    def _core(self) -> PoolCore[Task]: ...

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
    order they were first checkpointed); in :attr:`paused`, the trees it left as they
    were because they wait for a human's answers; in :attr:`failed`, the trees it
    could not recover (the others are recovered all the same)."""

    paused: tuple[PausedTree, ...]
    """Each root tree paused for approval (before the crash, or with a subagent
    paused inside a tree that was still running), in the order first checkpointed."""

    failed: tuple[tuple[str, Exception], ...]
    """Each root tree that could not be recovered, as ``(run_id, error)``: the root's
    run id and why (``CheckpointError``: a row of the tree cannot be read, or does
    not match its state, or the tree is deeper than ``agentcore.limits.MAX_STATE_DEPTH``;
    ``UnknownAgentError``: a run's spec is not in the pool;
    ``agentcore.ResumeError``: its spec cannot resume it; ``BudgetExceeded``: a
    budget over it refused it; any other error of ``subagent``'s or ``agentcore``'s
    own hierarchy that resuming it raised). Nothing of such a tree ran; its rows stay
    in the file as they were. An orphan (see ``recover``) whose end cannot be stored
    is listed under its own run id. In the order first checkpointed."""

    def __init__(
        self,
        tasks: Iterable[Task] = (),
        paused: Iterable[PausedTree] = (),
        failed: Iterable[tuple[str, Exception]] = (),
    ) -> None:
        super().__init__(tasks)
        self.paused = tuple(paused)
        self.failed = tuple(failed)

    def __repr__(self) -> str:
        return (f"Recovered({list(self)!r}, paused={list(self.paused)!r}, "
                f"failed={list(self.failed)!r})")


async def commit_checkpoint(point: agentcore.Checkpoint) -> None:
    """The checkpointer of every checkpointed task's Agent: writes ``point`` in the
    row of the task whose run it is (``current_task``: the run's own task, or the
    task whose run a tool call runs in), linked to the run that delegated it. A
    checkpoint.

    An ``ended`` checkpoint that cannot be stored is dropped, as a delegated run's
    end is (``_kept.end_row``): the run has ended, and its row keeps its last
    checkpoint (a crash before another write recovers the run from there, repeating
    no tool call). Raised, its CheckpointError would leave the run's task and end the
    pool with every other task in it.

    Raises:
      CheckpointError: any other checkpoint cannot be stored (the run ends with it).
    """
    task = current_task.get()
    assert task is not None, "a checkpointed Agent runs only in its pool's tasks"
    store = task.pool.checkpoints
    assert store is not None
    if task._budget is not None:  # the budgets go on from it after a crash
        point.state.spent = task._budget.spent()
    if point.kind is agentcore.CheckpointKind.ended and task.call_id is not None:
        # A delegated run's end is stored with its result, in one write, once its
        # task ends (``_durable._kept.end_row``): ended alone, a crash before the result is
        # stored would leave the delegating call with neither (answered interrupted).
        task._held_end = (point, _link(task))
        await trio.lowlevel.checkpoint()
        return
    if point.kind is agentcore.CheckpointKind.ended:
        with contextlib.suppress(CheckpointError):
            await store.write(task.name, *_link(task), point)
        return
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
    point = agentcore.lowlevel.start_checkpoint(
        agent.system_prompt, task.input, run_id="/".join(task.path), agent=agent.agent_id,
        path=task.path, history=task.history,
    )
    await store.write(task.name, *_link(task), point)
    return point


async def start_committed(task: Task) -> None:
    """Wait, shielded, until ``task`` (just accepted by a submit that returns it) has
    its ``start`` checkpoint committed (or refused: the task then fails), so that a
    task its submit returned is recovered after a crash from then on. Without
    checkpoints, or for a resumed task (its row exists: the claim's, or the crash's),
    a cancel-shielded checkpoint. A checkpoint."""
    if task.pool.checkpoints is None or task._resume is not None:
        await trio.lowlevel.cancel_shielded_checkpoint()
        return
    task._durable = done = trio.Event()  # its runner has not run yet: it sets it
    with trio.CancelScope(shield=True):
        await done.wait()


def start_done(task: Task) -> None:
    """Wake the submit waiting in :func:`start_committed` for ``task``, if any: its
    start checkpoint is committed or refused, or it will not be (the task ended
    first). Not a checkpoint."""
    if task._durable is not None:
        task._durable.set()


def _link(task: Task) -> tuple[str | None, str | None]:
    # The run id of the run that delegated ``task``'s run and the delegating call's id.
    parent = task.parent
    parent_run = parent._run.run_id if parent is not None and parent._run is not None else None
    return parent_run, task.call_id if parent_run is not None else None


async def end_unstarted(
    task: Task, start: agentcore.Checkpoint | None, bound: float
) -> None:
    """Mark ``task``'s run ended in its pool's checkpoints when it never ran (it was
    cancelled or failed before its run started): a run ends its own row otherwise.
    ``start``: its start checkpoint (a new run), or ``None`` for a resumed one (whose
    row a claim or a crash left ``running``: a cancelled resume is not recovered
    later, as a cancelled run is not). Without checkpoints, nothing. Shielded, for at
    most ``bound`` seconds; a failure to store it is dropped (the row stays
    ``running`` and :func:`recover` would restart it). A checkpoint."""
    store = task.pool.checkpoints
    state = start.state if start is not None else task._resume
    if store is None or state is None:
        return
    ended = agentcore.Checkpoint(agentcore.CheckpointKind.ended, state)
    with trio.move_on_after(bound, shield=True):
        with contextlib.suppress(CheckpointError):
            await store.write(task.name, *_link(task), ended)


async def commit_paused(task: Task) -> None:
    """Commit ``task``'s paused state again once its background children are nested
    in it (``_pool._ending.keep_background``, after the run's own ``paused`` checkpoint),
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


# The root runs each store's recoveries resumed: their rows stay ``running`` while
# the resumed runs go on, and a second recovery through the same store (``Pool.recover``
# called again) must not resume them again.
_resumed: weakref.WeakKeyDictionary[SqliteCheckpoints, set[str]] = (
    weakref.WeakKeyDictionary())


async def recover(pool: Pool, store: SqliteCheckpoints) -> Recovered:
    """Resume every root task ``store`` shows unfinished (``running`` at its last
    checkpoint: the process ended without it ending) from its last checkpoint, in
    ``pool``; returns their Tasks in the order they were first checkpointed. A
    checkpoint. It reads the rows under the store's writer lock
    (``SqliteCheckpoints.recovering``): a second recovery of the file is refused, and
    a second one through the same store does not resume a root again. A
    tree that waits for a human (its root paused, or a subagent of it paused for
    approval) is not resumed: it is listed in ``Recovered.paused``. A tree that cannot
    be recovered (a row of it unreadable, or refused by the checks below) is listed
    in ``Recovered.failed``, and the other trees are recovered.

    Raises:
      CheckpointError: the store cannot be locked or read as a whole (see
        ``SqliteCheckpoints.recovering``), or holds a run id twice.
    """
    # The rows of runs of this pool's own tasks are theirs, not a crash's: those live
    # before the read (one may end while the rows are read, after its row was read
    # running) and those accepted during it (one may also end before it returns).
    with pool._started.reading() as started:
        live = _live_runs(pool)
        found = await store.recovering()
        live |= started
    # The runs recovered start others (a nested run delegating again): none may take
    # the run id of a row of the file.
    number_past(pool, (r.run_id for r in found))
    found = [r for r in found if r.run_id not in live]
    rows = [r for r in found if isinstance(r, CheckpointRow)]
    _check_unique(found)
    failed = _unread(found)
    by_call: dict[tuple[str | None, str | None], CheckpointRow] = {
        (r.parent, r.call_id): r for r in rows if r.parent is not None
    }
    # A background child (wait: false) is tied to its parent's run by the parent's
    # run id and the id of the call that started it; that call is not in flight.
    background: dict[str, list[CheckpointRow]] = {}
    # An ended one with a state holds its result, kept for its parent (_durable._kept).
    for r in rows:
        if r.parent is not None and (r.status != "ended" or r.state is not None):
            background.setdefault(r.parent, []).append(r)
    ended = {r.run_id for r in rows if r.status == "ended"}
    for row in rows:
        if row.parent in ended and row.status == "running":
            try:
                await _orphan(pool, store, row)
            except CheckpointError as exc:  # reported; its row stays running
                failed[row.run_id] = exc
    tasks = []
    paused = []
    resumed = _resumed.setdefault(store, set())
    for row in rows:
        if row.parent is not None or row.run_id in failed:
            continue
        try:
            if row.status == "paused":
                assert row.state is not None
                _nest_paused(pool, row.state, by_call, background, 1)
                paused.append(PausedTree(row.name, row.state, row.checkpoint))
            elif row.status == "running" and row.run_id not in resumed:
                state = _tree(pool, row, by_call, background)
                if state.pending_approvals:
                    # A subagent paused for a human before the crash: the tree waits
                    # for answers (it stays in the file), it is listed, not resumed.
                    paused.append(PausedTree(row.name, state, row.checkpoint))
                    continue
                # Not claimed as a resume: a crash before its next checkpoint leaves
                # the same row, recovered again the same way. (Its checks, raising
                # before anything is queued, are a failure of this tree alone.)
                tasks.append(await pool._resume(state, row.name, None, claim=False))
                resumed.add(row.run_id)
        except (SubagentError, agentcore.AgentCoreError) as exc:
            # A typed error of this tree alone (its rows, its spec, its budget, the
            # pool closed): the other trees are recovered all the same.
            failed[row.run_id] = exc
    order = {r.run_id: k for k, r in enumerate(found)}
    return Recovered(tasks, paused, sorted(failed.items(), key=lambda f: order.get(f[0], -1)))


class StartedRuns:
    """The run ids of the tasks a pool accepted while a :func:`recover` of it reads
    the rows (``Pool._accept`` tells it of each task; only this class writes them): a
    task submitted and ended during the read is live neither before the read nor
    after it, and its row may have been read running. Nothing is kept while no
    recover reads."""

    __slots__ = ("_reads", "_runs")

    def __init__(self) -> None:
        # Invariant: _runs is empty while _reads == 0 (no recover reads).
        self._reads = 0
        self._runs: set[str] = set()

    def accepted(self, task: Task) -> None:
        """Remember the run id of ``task``, just accepted, if a recover reads now.
        Not a checkpoint."""
        if self._reads:
            self._runs.add(_run_id(task))

    @contextlib.contextmanager
    def reading(self) -> Iterator[set[str]]:
        """A block in which the run ids of the tasks accepted are remembered: it
        yields their set, read before the block ends (with several recovers reading
        at once, it holds those accepted since the first of them began)."""
        self._reads += 1
        try:
            yield self._runs
        finally:
            self._reads -= 1
            if not self._reads:
                self._runs = set()
            assert self._reads >= 0


def _run_id(task: Task) -> str:
    # The run id of ``task``'s run (a queued one's is its resumed run's, or the one
    # its path gives it).
    run = task._run if task._run is not None else task._resume
    return run.run_id if run is not None else "/".join(task.path)


def _live_runs(pool: Pool) -> set[str]:
    # The run ids of the runs of ``pool``'s live tasks (queued or running).
    return {_run_id(node.handle) for node in pool._core.live.values()}


async def number_past_file(pool: Pool, store: SqliteCheckpoints) -> None:
    """Number ``pool``'s tasks past every run of ``store``'s file, so that a task
    submitted before ``recover`` does not take (and overwrite) the row of a run a
    crash left. A file that cannot be read is left to the first write to report. A
    checkpoint."""
    with contextlib.suppress(CheckpointError):
        number_past(pool, await store.run_ids())


def _unread(found: list[CheckpointRow | UnreadRow]) -> dict[str, Exception]:
    # The rows that could not be read, each as its tree's failure (by the run id of
    # the topmost row its parent links reach): its runs are not recovered, since a
    # child missing from its tree would make its delegating call look interrupted.
    parents = {r.run_id: r.parent for r in found}
    failed: dict[str, Exception] = {}
    for r in found:
        if isinstance(r, UnreadRow):
            top, seen = r.run_id, {r.run_id}
            while (up := parents.get(top)) is not None and up in parents and up not in seen:
                top = up
                seen.add(up)
            failed.setdefault(top, r.error)
    return failed


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
