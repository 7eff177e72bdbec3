"""PoolCore: the pool's rules as pure bookkeeping, with no I/O (sans-IO, like h11).

It owns the state of the pool's slots, queue and task tree: which task holds a
concurrency slot, which wait for one (queued tasks, and parents coming back from a
subagent), the parent/child links, each task's status and the counts, who lent its
slot, which subtrees were cancelled, and whether the pool is closed. Its methods
are synchronous: each checks that its transition is legal (it raises and changes
nothing otherwise) and returns the *effects* the trio shell (:class:`subagent.Pool`)
must carry out: start a runner, grant a slot, wake a submitter, cancel a run,
resolve a task. Nothing here imports trio: the rules can be driven alone (see
tests/proof/test_core.py).
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import Any, Generic

from .._errors import MaxDepthError, PoolClosedError
from ._node import (
    CANCEL_TEXTS,
    TRANSITIONS,
    Arrived,
    CancelCause,
    CancelRun,
    Effect,
    FanoutFull,
    Grant,
    H,
    IllegalTransition,
    Node,
    Path,
    QueueFull,
    Resolve,
    StartRunner,
    TaskStatus,
    WakeFanout,
    WakeSubmitter,
)
from ._statistics import PoolStatistics

__all__ = [
    "CANCEL_TEXTS",
    "TRANSITIONS",
    "Arrived",
    "CancelCause",
    "CancelRun",
    "Effect",
    "FanoutFull",
    "Grant",
    "IllegalTransition",
    "Node",
    "Path",
    "PoolCore",
    "QueueFull",
    "Resolve",
    "StartRunner",
    "TaskStatus",
    "WakeFanout",
    "WakeSubmitter",
]


# The statuses run_ended compares with, read once: reading an enum's member
# (``TaskStatus.running``) goes through EnumType.__getattr__ (about 200 ns on
# Python 3.11), and every run's end passes here.
_QUEUED, _RUNNING, _FINISHED, _CANCELLED, _PAUSED = (
    TaskStatus.queued, TaskStatus.running, TaskStatus.finished, TaskStatus.cancelled,
    TaskStatus.paused,
)


class EndedCancels(Generic[H]):
    """Resolved nodes a cancel reached, by path, while referenced elsewhere: a
    mapping of weak references without callbacks (a ``WeakValueDictionary`` makes a
    Python-level keyed reference per entry, and resolving a cancelled task is on
    every cancelled run's way out). Dead entries are swept when the table has
    doubled since the last sweep, so it stays within twice the referenced nodes
    (plus a constant): memory stays flat, and each write is amortised O(1).
    """

    __slots__ = ("_refs", "_sweep_at")

    def __init__(self) -> None:
        self._refs: dict[Path, weakref.ref[Node[H]]] = {}
        self._sweep_at = _SWEEP_FLOOR

    def get(self, path: Path) -> Node[H] | None:
        """The node at ``path``, if it is recorded and still referenced."""
        ref = self._refs.get(path)
        return None if ref is None else ref()

    def __setitem__(self, path: Path, node: Node[H]) -> None:
        refs = self._refs
        refs[path] = weakref.ref(node)
        if len(refs) >= self._sweep_at:
            self._refs = refs = {p: r for p, r in refs.items() if r() is not None}
            self._sweep_at = max(_SWEEP_FLOOR, 2 * len(refs))

    def __len__(self) -> int:
        """Entries held, dead ones not yet swept included."""
        return len(self._refs)


_SWEEP_FLOOR = 64


def add_usage(one: Any, other: Any) -> Any:
    """``one + other``, where None is nothing (usage values are opaque to the core)."""
    if one is None:
        return other
    if other is None:
        return one
    return one + other


class PoolCore(Generic[H]):
    """The pool's rules: slots, queue, the task tree, lending, cancels, closing.

    Every mutator is synchronous, raises before changing anything when its move is
    not legal, and returns the list of effects for the shell to apply in order.
    """

    def __init__(self, max_concurrent: int, max_queued: int, max_depth: int) -> None:
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self.max_depth = max_depth
        # Invariant: accepted == len(queue) + running + finished + failed + cancelled
        # + paused.
        self.accepted = 0
        self.running = 0
        self.finished = 0
        self.failed = 0
        self.cancelled = 0
        self.paused = 0
        # Invariant: 0 <= holding <= max_concurrent, the nodes with holds_slot.
        self.holding = 0
        # Invariant: len(queue) <= max_queued; every node in it is queued.
        self.queue: deque[Node[H]] = deque()
        # Running nodes that lent their slot and wait to take one back; served first.
        self.returning: deque[Node[H]] = deque()
        # Accepted and not resolved, by path.
        self.live: dict[Path, Node[H]] = {}
        # Resolved nodes a cancel reached, by path, while their handle is referenced
        # (the handle references its node): a submit below one is cancelled too,
        # whether or not it has resolved yet. Weak: memory stays flat.
        self.ended_cancels: EndedCancels[H] = EndedCancels()
        # Submits parked on the full queue, in order.
        self.submitters: deque[object] = deque()
        self.closed = False
        self.aborted = False

    def _check(self) -> None:
        assert 0 <= self.holding <= self.max_concurrent, self.holding
        assert len(self.queue) <= self.max_queued
        assert self.running >= 0
        assert self.accepted == (
            len(self.queue) + self.running + self.finished + self.failed + self.cancelled
            + self.paused
        )

    # -- accepting ---------------------------------------------------------------

    def admit(
        self, name: str, parent_path: Path, caller: Node[H] | None
    ) -> tuple[Node[H] | None, int]:
        """Check that a task ``name`` may be accepted under ``parent_path`` now, for a
        submit made by ``caller`` (the task of this pool whose run submits, if any);
        return its parent node (None at the root or under a path with no live task)
        and its depth (the Node's ``depth``).

        A task's depth is its path's length, or one more than its caller's depth if
        that is deeper: a run cannot start work beyond ``max_depth`` by submitting it
        under a shorter path (``parent_path=()``).

        Raises:
          MaxDepthError: the path, or the caller, is at the depth limit.
          PoolClosedError: the pool was cancelled, or it is closed and the caller is
            not the running parent.
          QueueFull: the queue is full.
        """
        depth = len(parent_path)
        if caller is not None and caller.depth > depth:
            depth = caller.depth
            if depth >= self.max_depth:
                raise MaxDepthError(name, parent_path, self.max_depth, caller.path, depth + 1)
        if depth >= self.max_depth:
            raise MaxDepthError(name, parent_path, self.max_depth)
        if self.aborted:
            raise PoolClosedError("the pool was cancelled: it accepts no new tasks")
        parent = self.live.get(parent_path) if parent_path else None
        # Accepted work may still delegate after close(): the caller is a running
        # task of this pool submitting under its own path.
        inside = caller is not None and caller is parent and caller.status is TaskStatus.running
        if self.closed and not inside:
            raise PoolClosedError("the pool is closed: it accepts no new tasks")
        if len(self.queue) >= self.max_queued:
            raise QueueFull
        return parent, depth + 1

    def accept(
        self, node: Node[H], *, fanout: bool = False, background: bool = False
    ) -> list[Effect[H]]:
        """Take ``node`` (admitted just before, not yet seen) into the queue.

        ``fanout``: it takes the fan-out slot of its parent claimed for it
        (:meth:`claim_fanout`); ``background``: its result is delivered into its
        parent's run (see :meth:`settle`).
        """
        if node.path in self.live or node.status is not TaskStatus.queued:
            raise IllegalTransition(f"{node!r} was accepted already")
        if len(self.queue) >= self.max_queued:
            raise IllegalTransition("accept without admit: the queue is full")
        self._adopt(node, fanout, background)
        self.accepted += 1
        self.live[node.path] = node
        self.queue.append(node)
        if node.parent is not None:
            node.parent.children.append(node)
        effects: list[Effect[H]] = [StartRunner(node)]
        self._pump(effects)
        cause = self._under_a_cancel(node.parent, node.path[:-1])
        if cause is not None:
            self._cancel_tree(node, effects, cause)
        if __debug__:
            self._check()
        return effects

    def _under_a_cancel(self, parent: Node[H] | None, parent_path: Path) -> CancelCause | None:
        # Below a node a cancel reached, live or resolved (while referenced): that
        # cancel's cause (None: none). The outcome must not depend on whether it has
        # resolved yet.
        if parent is not None and parent.cancel_cause is not None:
            return parent.cancel_cause
        live = self.live
        ended = self.ended_cancels
        for depth in range(1, len(parent_path) + 1):
            prefix = parent_path[:depth]
            node = live.get(prefix)
            if node is None:
                node = ended.get(prefix)
            if node is not None and node.cancel_cause is not None:
                return node.cancel_cause
        return None

    def park_submitter(self, token: object) -> None:
        """A submit waits for room in the queue (``token``: what to wake)."""
        self.submitters.append(token)

    def withdraw_submitter(self, token: object) -> None:
        """A parked submit was cancelled: forget it."""
        self.submitters.remove(token)

    def _wake_one(self, effects: list[Effect[H]]) -> None:
        if self.submitters:
            effects.append(WakeSubmitter(self.submitters.popleft()))

    # -- slots ----------------------------------------------------------------------

    def _pump(self, effects: list[Effect[H]]) -> None:
        # The one place that hands free slots out: parents coming back from a
        # subagent first (they finish accepted work), then queued tasks in order.
        while self.holding < self.max_concurrent:
            if self.returning:
                node = self.returning.popleft()
            elif self.queue:
                node = self.queue.popleft()
                node.status = TaskStatus.running
                self.running += 1
                self._wake_one(effects)
            else:
                return
            self.holding += 1
            node.holds_slot = True
            effects.append(Grant(node))

    def _release(self, node: Node[H], effects: list[Effect[H]]) -> None:
        if node.holds_slot:
            node.holds_slot = False
            self.holding -= 1
            if self.returning or self.queue:
                self._pump(effects)

    def lend(self, node: Node[H]) -> list[Effect[H]]:
        """A call of ``node``'s run starts blocking: the first one lends its slot."""
        if node.status is not TaskStatus.running:
            raise IllegalTransition(f"{node!r} cannot lend a slot")
        node.lending += 1
        effects: list[Effect[H]] = []
        if node.lending == 1:
            self._release(node, effects)
        if __debug__:
            self._check()
        return effects

    def lend_ended(self, node: Node[H]) -> bool:
        """A lending call of ``node`` ended; True if it was the last (take the slot back)."""
        if node.lending < 1:
            raise IllegalTransition(f"{node!r} is not lending")
        node.lending -= 1
        return node.lending == 0

    def await_child(self, parent: Node[H], child: Node[H]) -> None:
        """``parent``'s lending call waits for ``child`` alone."""
        parent.awaiting = child

    def stop_awaiting(self, parent: Node[H], child: Node[H]) -> None:
        """``parent``'s call waiting for ``child`` ended (another may wait by now)."""
        if parent.awaiting is child:
            parent.awaiting = None

    def take_back(self, node: Node[H]) -> tuple[bool, list[Effect[H]]]:
        """``node`` wants a slot back: granted now (True), or it waits among the
        returning (False) until a Grant; :meth:`withdraw` undoes the wait."""
        if node.holds_slot:
            return True, []
        if node in self.returning:
            raise IllegalTransition(f"{node!r} is waiting for a slot already")
        self.returning.append(node)
        effects: list[Effect[H]] = []
        self._pump(effects)
        if __debug__:
            self._check()
        return node.holds_slot, effects

    def withdraw(self, node: Node[H]) -> None:
        """A waiting take-back was cancelled: it leaves the line (no effect)."""
        self.returning.remove(node)

    # -- ends -----------------------------------------------------------------------

    def run_ended(self, node: Node[H], status: TaskStatus) -> list[Effect[H]]:
        """``node``'s runner ended its run with ``status`` (cancelled: it did not end
        on its own). Its slot goes back to its parent if the parent waits for it
        alone, else to the pool; its status and the counts move."""
        if node.status is _RUNNING and status not in TRANSITIONS[node.status]:
            raise IllegalTransition(f"{node!r} cannot end {status}")
        if node.resolved or node in self.returning:
            raise IllegalTransition(f"{node!r} cannot end now")
        effects: list[Effect[H]] = []
        parent = node.parent
        if (
            node.holds_slot
            and parent is not None
            and parent.awaiting is node
            and parent.lending == 1
            and not parent.holds_slot
            and parent.cancel_cause is None
        ):
            # Accepted work finishes before queued work: no pump in between.
            node.holds_slot = False
            parent.holds_slot = True
        else:
            self._release(node, effects)
        if node.status is _QUEUED:
            self._cancel_one(node, effects, CancelCause.pool_closed)
        elif node.status is _RUNNING:
            self.running -= 1
            node.status = status
            if status is _FINISHED:
                self.finished += 1
            elif status is _CANCELLED:
                self.cancelled += 1
            elif status is _PAUSED:
                self.paused += 1
            else:
                self.failed += 1
        if __debug__:
            assert not node.holds_slot
            self._check()
        return effects

    def resolve(self, node: Node[H]) -> list[Effect[H]]:
        """``node``'s runner is done: the core keeps nothing of it but, while its
        handle is referenced, the mark of a cancel (none once the pool is aborted:
        nothing is admitted after that, so nothing would read it)."""
        if node.resolved or node.status in TRANSITIONS or node.holds_slot:
            raise IllegalTransition(f"{node!r} cannot resolve")
        del self.live[node.path]
        node.resolved = True
        if node.cancel_cause is not None and not self.aborted:
            self.ended_cancels[node.path] = node
        return [Resolve(node)]

    def _cancel_one(self, node: Node[H], effects: list[Effect[H]], cause: CancelCause) -> None:
        if node.cancel_cause is None:
            node.cancel_cause = cause
        effects.append(CancelRun(node))
        if node.status is _QUEUED:
            self.queue.remove(node)
            self._wake_one(effects)
            node.status = _CANCELLED
            self.cancelled += 1

    def _cancel_tree(self, node: Node[H], effects: list[Effect[H]], cause: CancelCause) -> None:
        stack = [node]
        while stack:
            one = stack.pop()
            self._cancel_one(one, effects, cause)
            if one.resolved:
                self.ended_cancels[one.path] = one
            stack.extend(one.children)

    def cancel(
        self, node: Node[H], cause: CancelCause = CancelCause.caller
    ) -> list[Effect[H]]:
        """Cancel ``node`` and every node below it (live or resolved), each for
        ``cause`` unless a cancel reached it before; idempotent."""
        effects: list[Effect[H]] = []
        self._cancel_tree(node, effects, cause)
        if __debug__:
            self._check()
        return effects

    # -- lifecycle ------------------------------------------------------------------

    def close(self) -> list[Effect[H]]:
        """Accept nothing more from outside; every parked submit wakes (to fail)."""
        self.closed = True
        effects: list[Effect[H]] = [WakeSubmitter(token) for token in self.submitters]
        self.submitters.clear()
        return effects

    def abort(self, cause: CancelCause = CancelCause.pool_closed) -> list[Effect[H]]:
        """Close, refuse every submit, and cancel every live node (for ``cause``,
        unless a cancel reached it before)."""
        effects = self.close()
        self.aborted = True
        for node in list(self.live.values()):
            self._cancel_one(node, effects, cause)
        if __debug__:
            self._check()
        return effects

    def statistics(self) -> PoolStatistics:
        """A snapshot of the counts and limits."""
        return PoolStatistics(
            running=self.running,
            queued=len(self.queue),
            finished=self.finished,
            failed=self.failed,
            cancelled=self.cancelled,
            accepted=self.accepted,
            holding_slots=self.holding,
            waiting_submitters=len(self.submitters),
            max_concurrent=self.max_concurrent,
            max_queued=self.max_queued,
            max_depth=self.max_depth,
            closed=self.closed,
            paused=self.paused,
        )

    # -- a task and its children ----------------------------------------------------
    # The fan-out bound (``max_children``), background delivery of results into the
    # parent's run, and the roll-up of tree usage. Same contract as above (check, then
    # change, then return the effects; an illegal move raises
    # :class:`IllegalTransition` and changes nothing).
    #
    # The state is per node (see :class:`subagent._core._node.Node`): ``fanout_limit``,
    # ``fanout_used``, ``fanout_waiters`` and ``holds_fanout``; ``deliver_to``,
    # ``background`` and ``unread``; ``usage``, ``child_usage`` and ``sealed``.

    def claim_fanout(self, parent: Node[H]) -> bool:
        """Take one of ``parent``'s fan-out slots for a child about to be submitted:
        True if one was free (the claim then goes to :meth:`accept` with
        ``fanout=True``, or back with :meth:`release_fanout`), else False (park it)."""
        if parent.resolved:
            raise IllegalTransition(f"{parent!r} has resolved: it has no fan-out slots")
        if parent.fanout_used >= parent.fanout_limit:
            return False
        parent.fanout_used += 1
        if __debug__:
            self._check_fanout(parent)
        return True

    def park_fanout(self, parent: Node[H], token: object) -> None:
        """A claim waits for one of ``parent``'s fan-out slots (``token``: what to
        wake). The slot is handed to it by a :class:`WakeFanout`."""
        if parent.fanout_used < parent.fanout_limit:
            raise IllegalTransition(f"{parent!r} has a free fan-out slot: claim it")
        if parent.fanout_waiters is None:
            parent.fanout_waiters = deque()
        parent.fanout_waiters.append(token)

    def withdraw_fanout(self, parent: Node[H], token: object) -> None:
        """A parked claim was cancelled before it got a slot: forget it."""
        if parent.fanout_waiters is None or token not in parent.fanout_waiters:
            raise IllegalTransition(f"no claim of {parent!r} is parked as {token!r}")
        parent.fanout_waiters.remove(token)

    def release_fanout(self, parent: Node[H]) -> list[Effect[H]]:
        """A claimed fan-out slot of ``parent`` is given back unused (its submit
        failed or was cancelled)."""
        if parent.fanout_used < 1:
            raise IllegalTransition(f"{parent!r} has no fan-out slot claimed")
        effects: list[Effect[H]] = []
        self._free_fanout(parent, effects)
        return effects

    def _free_fanout(self, parent: Node[H], effects: list[Effect[H]]) -> None:
        # Like a semaphore's release: the slot goes straight to the first parked claim.
        waiters = parent.fanout_waiters
        if waiters:
            effects.append(WakeFanout(waiters.popleft()))
        else:
            parent.fanout_used -= 1
        if __debug__:
            self._check_fanout(parent)

    def _check_fanout(self, node: Node[H]) -> None:
        assert 0 <= node.fanout_used <= node.fanout_limit, node
        assert not node.fanout_waiters or node.fanout_used == node.fanout_limit, node

    def _adopt(self, node: Node[H], fanout: bool, background: bool) -> None:
        # The family side of accept (before any change): a claimed fan-out slot goes
        # to the child, and a background child delivers into its parent's run.
        parent = node.parent
        if (fanout or background) and parent is None:
            raise IllegalTransition(f"{node!r} has no parent to hold a fan-out slot of")
        if fanout:
            assert parent is not None
            if parent.fanout_used < 1:
                raise IllegalTransition(f"no fan-out slot of {parent!r} was claimed")
            node.holds_fanout = True
        if background:
            assert parent is not None
            node.deliver_to = parent
            parent.background[node] = None

    def to_background(self, parent: Node[H], child: Node[H]) -> None:
        """``child`` (of ``parent``, waited for until now) goes on in the background:
        its result is delivered into ``parent``'s run, or orphaned."""
        if child.parent is not parent or child.deliver_to is not None or child.resolved:
            raise IllegalTransition(f"{child!r} cannot go to the background of {parent!r}")
        child.deliver_to = parent
        parent.background[child] = None
        if __debug__:
            self._check_delivery(parent)

    def settle(self, node: Node[H], inbox_open: bool) -> tuple[bool, list[Effect[H]]]:
        """Account for ``node`` after it reported its end (its run ended, it sealed,
        it has not resolved): its fan-out slot goes back to its parent (or straight
        to a parked claim), its tree usage is added to its parent's unless the
        parent has sealed, and a background child's result goes into its parent's
        inbox when ``inbox_open`` (the shell's view of the parent's run).

        Returns:
          False when the result is an orphan (a background child whose parent's run
          has ended: the shell reports it), else True; and the effects.
        """
        target = node.deliver_to
        if node.status in TRANSITIONS or node.resolved or not node.sealed:
            raise IllegalTransition(f"{node!r} cannot settle now")
        if target is not None and node not in target.background:
            raise IllegalTransition(f"{node!r} has settled already")
        effects: list[Effect[H]] = []
        parent = node.parent
        if node.holds_fanout:
            assert parent is not None
            node.holds_fanout = False
            self._free_fanout(parent, effects)
        if parent is not None and not parent.sealed:
            parent.child_usage = add_usage(parent.child_usage, self.tree_usage(node))
        if target is None:
            return True, effects
        del target.background[node]
        effects.append(Arrived(target))
        if inbox_open:
            target.unread.append(node)
        if __debug__:
            self._check_delivery(target)
        return inbox_open, effects

    def read(self, parent: Node[H], child: Node[H]) -> None:
        """``parent``'s run read ``child``'s result from its inbox."""
        if child not in parent.unread:
            raise IllegalTransition(f"{child!r} is not unread in {parent!r}")
        parent.unread.remove(child)

    def take_unread(self, node: Node[H]) -> list[Node[H]]:
        """``node``'s run has ended: the results it did not read (orphans now)."""
        unread, node.unread = node.unread, []
        return unread

    def _check_delivery(self, node: Node[H]) -> None:
        assert all(c.deliver_to is node for c in node.background), node
        assert all(c.deliver_to is node for c in node.unread), node
        assert not set(node.unread) & set(node.background), node

    def seal(self, node: Node[H], usage: Any) -> None:
        """``node``'s run has ended with ``usage`` (None: it did not run) and it is
        about to report its end: later children's usage is no longer added."""
        if node.sealed or node.status in TRANSITIONS:
            raise IllegalTransition(f"{node!r} cannot seal now")
        node.usage = usage
        node.sealed = True

    @staticmethod
    def tree_usage(node: Node[H]) -> Any:
        """``node``'s own usage (once sealed) plus that of its children that settled
        before it sealed (their tree usage, recursively); None for none."""
        return add_usage(node.usage, node.child_usage)
