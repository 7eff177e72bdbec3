"""The pool core's values: a task's status and its legal moves, the core's record of
one task (:class:`Node`), and the effects the core returns for the trio shell to carry
out. Sans-IO: nothing here imports trio or does I/O (see ``subagent._core._core``).
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Any, Generic, TypeVar

import attrs

#: An AgentPath (``agentcore.AgentPath``): kept as a plain tuple here.
Path = tuple[str, ...]

#: The shell's handle of a node (subagent.Task), opaque to the core.
H = TypeVar("H")


class TaskStatus(enum.StrEnum):
    """Where a :class:`Task` is in its life."""

    queued = "queued"
    """Accepted, waiting for a concurrency slot."""
    running = "running"
    """Started and not ended (also while it waits for a subagent)."""
    finished = "finished"
    """Ended ``stop``, ``max_turns`` or ``interrupted``: it has a Result."""
    failed = "failed"
    """Its run ended ``error``."""
    timed_out = "timed_out"
    """Its run exceeded the spec's ``timeout`` or ``idle_timeout``."""
    cancelled = "cancelled"
    """Cancelled, before or while running."""
    paused = "paused"
    """Its run paused: a gate deferred a call to a human (``Task.state``; resume it
    with :meth:`Pool.resume`)."""


class CancelCause(enum.StrEnum):
    """Who cancelled a task: the ``cause`` in the data of its ``task_cancelled``
    ledger entry (``ledger.EntryKind.task_cancelled``). The first cancel to reach a
    task names it; the tasks below it that the same cancel reaches get the same cause
    (a submit later below a cancelled task too)."""

    caller = "caller"
    """``Task.cancel()`` of the task or of a task above it, by the code holding the
    task (``subagent serve``'s HTTP cancel, the ``subagent mcp`` server's when its
    client cancels the call, an asyncio caller's through ``subagent.aio``)."""
    timeout = "timeout"
    """A time limit above it: the ``timeout`` or ``idle_timeout`` of the task whose
    run delegated it, or the ``tool_timeout`` of that delegating call."""
    parent_ended = "parent_ended"
    """Its parent's run ended, or stopped waiting for it, without a cancel of its own:
    a background child that is not critical when its parent's run ends, a child whose
    delegating call was cancelled by its parent's ``Run.abort``."""
    pool_closed = "pool_closed"
    """The pool was cancelled: ``Pool.cancel()``, the block of ``open_pool`` raised or
    was cancelled, or a cancel from outside the pool reached its tasks (the ``subagent
    mcp`` server's calls in flight when its client closes stdin or dies)."""
    interrupt = "interrupt"
    """Ctrl-C or SIGTERM (a ``KeyboardInterrupt`` out of the block of ``open_pool``,
    as the CLI's commands stop)."""
    budget = "budget"
    """A budget over it was spent (see ``subagent.Budget``)."""
    temporal = "temporal"
    """Temporal cancelled the activity running its tree."""


#: What the ``abort`` ledger entry of a task's run says when a cancel ended it: who
#: cancelled it (the cause its ``task_cancelled`` entry names), in our words.
CANCEL_TEXTS: dict[CancelCause, str] = {
    CancelCause.caller: "cancelled (caller): Task.cancel() of it or of a task above it",
    CancelCause.timeout: "cancelled (timeout): a time limit above it passed",
    CancelCause.parent_ended:
        "cancelled (parent_ended): its parent's run ended or stopped waiting for it",
    CancelCause.pool_closed: "cancelled (pool_closed): the pool was cancelled",
    CancelCause.interrupt: "cancelled (interrupt): Ctrl-C or SIGTERM",
    CancelCause.budget: "cancelled (budget): a budget over it was spent",
    CancelCause.temporal:
        "cancelled (temporal): Temporal cancelled the activity running its tree",
}


#: Every legal move of a task's status; anything else raises IllegalTransition.
TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.queued: frozenset({TaskStatus.running, TaskStatus.cancelled}),
    TaskStatus.running: frozenset(
        {TaskStatus.finished, TaskStatus.failed, TaskStatus.timed_out, TaskStatus.cancelled,
         TaskStatus.paused}
    ),
}


class IllegalTransition(RuntimeError):
    """A core method was called in a state where its transition is not legal (a bug
    in the shell, never a remote failure); the core is unchanged."""


class QueueFull(Exception):
    """The queue holds ``max_queued`` tasks (the shell raises ``trio.WouldBlock``)."""


class FanoutFull(Exception):
    """Every fan-out slot of ``node`` is held: a submit under it must wait for one."""

    def __init__(self, node: Node[Any]) -> None:
        super().__init__(node)
        self.node = node


@attrs.define(eq=False, repr=False, weakref_slot=True)
class Node(Generic[H]):
    """The core's record of one accepted task. Only :class:`PoolCore` writes its fields."""

    path: Path
    parent: Node[H] | None
    #: The shell's handle (the Task); the core never looks inside it.
    handle: H
    #: Its children, background children and unread results live in containers made
    #: on first use (the properties below): most tasks never delegate, and three
    #: empty containers cost every parked run 176 B.
    _children: list[Node[H]] | None = attrs.field(default=None, init=False)
    status: TaskStatus = TaskStatus.queued
    #: Invariant: only a running node holds a slot; PoolCore.holding counts them.
    holds_slot: bool = False
    #: Calls lending this node's slot now; the slot is lent by the first, taken back
    #: after the last.
    lending: int = 0
    #: The child its lending call waits for alone (the slot goes straight back to it).
    awaiting: Node[H] | None = None
    #: Who cancelled it, once a cancel reached it (mirrors its run's cancel scope):
    #: the first cancel's cause; None while none has.
    cancel_cause: CancelCause | None = None
    #: Whether it has resolved (the shell's ``done``); it is then out of ``live``.
    resolved: bool = False
    #: Its depth: its path's length, or one more than the depth of the task whose run
    #: submitted it, if that is deeper (see PoolCore.admit).
    depth: int = 0
    #: Fan-out (``max_children``) of its run: the limit, the fan-out slots held now
    #: (by its live children and by claims about to submit one), and the claims parked
    #: for one, in order (a slot freed goes straight to the first; None: none yet).
    #: Invariant: 0 <= fanout_used <= fanout_limit; waiters only while it is full.
    fanout_limit: int = 0
    fanout_used: int = 0
    fanout_waiters: deque[object] | None = None
    #: Child side: whether it holds one of its parent's fan-out slots (until it settles).
    holds_fanout: bool = False
    #: Background delivery. Child side: the node whose run its result goes to.
    deliver_to: Node[H] | None = None
    #: Parent side: background children whose result is not in its run's inbox yet
    #: (in the order they went to the background), and results in the inbox not read
    #: yet. Invariant: a child is in at most one of them, and its deliver_to is self.
    _background: dict[Node[H], None] | None = attrs.field(default=None, init=False)
    _unread: list[Node[H]] | None = attrs.field(default=None, init=False)
    #: Usage roll-up (opaque values that support ``+``; None is nothing): its own
    #: run's usage (set when it seals), and the tree usage of its children that
    #: settled before it sealed. PoolCore.tree_usage adds them.
    usage: Any = None
    child_usage: Any = None
    #: Set just before the task reports its end: later children's usage is not added.
    sealed: bool = False

    @property
    def has_family(self) -> bool:
        """Whether it may have children, background children or unread results (one
        of their containers was made) or delivers its result into a parent's run:
        False lets the shell skip the family steps of its end (reading the
        properties below would make the containers)."""
        return not (
            self._children is None and self._background is None and self._unread is None
            and self.deliver_to is None
        )

    @property
    def children(self) -> list[Node[H]]:
        """The nodes accepted under it, in order (the list is made on first use)."""
        if self._children is None:
            self._children = []
        return self._children

    @property
    def background(self) -> dict[Node[H], None]:
        """Parent side: background children whose result is not in its run's inbox yet
        (the dict is made on first use); see the fields above."""
        if self._background is None:
            self._background = {}
        return self._background

    @property
    def unread(self) -> list[Node[H]]:
        """Parent side: results in the inbox not read yet (made on first use)."""
        if self._unread is None:
            self._unread = []
        return self._unread

    @unread.setter
    def unread(self, value: list[Node[H]]) -> None:
        self._unread = value

    def __repr__(self) -> str:
        return f"<Node {'/'.join(self.path)} {self.status}>"


@attrs.frozen
class StartRunner(Generic[H]):
    """Start the runner of a newly accepted task (in the pool's nursery)."""

    node: Node[H]


@attrs.frozen
class Grant(Generic[H]):
    """The node holds a slot now: wake its runner (or its take-back) if it waits."""

    node: Node[H]


@attrs.frozen
class WakeSubmitter:
    """A submit parked on the full queue may try again (``token`` is what it parked)."""

    token: object


@attrs.frozen
class CancelRun(Generic[H]):
    """Cancel the node's run (its scope, and a shielded take-back in progress)."""

    node: Node[H]


@attrs.frozen
class Resolve(Generic[H]):
    """The task has resolved: wake whoever waits for it."""

    node: Node[H]


@attrs.frozen
class WakeFanout:
    """A claim parked for a fan-out slot holds one now (``token`` is what it parked)."""

    token: object


@attrs.frozen
class Arrived(Generic[H]):
    """A background child of the node settled: wake whoever waits for its results."""

    node: Node[H]


Effect = (
    StartRunner[H] | Grant[H] | WakeSubmitter | CancelRun[H] | Resolve[H] | WakeFanout | Arrived[H]
)
