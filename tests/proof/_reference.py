"""A reference model of the pool's semantics (SPEC 3.2, 3.3, 3.5): plain Python, no trio.

It plays the same operations as tests/proof/test_model.py plays on a real pool and
says what must follow: the outcome of each submit (a task, or the name of the error
it raises), the statistics, each task's status, and the kinds of the events each
path has delivered. It assumes the harness's workload:

* two specs: ``w`` (the spec's ``timeout``, if any) and ``v`` (no timeout); every
  run's model call blocks until the test completes it, fails it, or makes it
  delegate (foreground, ``wait: true``) to ``v`` or to the unknown agent ``nope``;
* streams big enough never to block, numbered 0 (the pool's) to 2;
* at most one submit blocked on the full queue, and no delegation into a full
  queue (with two waiters trio's scheduler would decide which is accepted first);
  a blocked submit names no task's path as its parent (if that task is cancelled
  while it waits, whether it is accepted under the cancelled task, and so
  cancelled, or after the task resolved, and so runs, is the scheduler's choice:
  see tests/proof/test_found_bugs.py);
* timeouts only on tasks with no parent (so two deadlines of one path tree never
  meet: which of two cancel scopes wins would be the scheduler's choice).

Work the pool does in other trio tasks (a woken submitter, a queued task that got
a slot, a parent resuming after its subagent) is a continuation run after the
synchronous part of an operation, in the order the pool would schedule it where
that order matters.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable

import attrs

from subagent import PoolStatistics

ROOT = "w"
"""The spec that may have a timeout."""
SUB = "v"
"""The spec delegations name (no timeout)."""
UNKNOWN = "nope"
"""A name no spec has."""
WAITING = "waiting"
"""The outcome of a submit still blocked on the full queue."""

_RUNNING = frozenset({"starting", "model", "delegating", "reacquiring", "granted"})
_ENDED = frozenset({"finished", "failed", "timed_out", "cancelled"})


@attrs.define(eq=False, repr=False)
class RefTask:
    """The model of one accepted task.

    ``state`` is ``queued``; while running: ``starting`` (it has a slot, its run has
    not started), ``model`` (blocked in a model call, holding a slot), ``delegating``
    (waiting for its foreground subagent ``child``; no slot), ``reacquiring``
    (its subagent ended, waiting for a slot), ``granted`` (got it back, not resumed
    yet); and once ended: ``finished``, ``failed``, ``timed_out``, ``cancelled``.
    """

    name: str
    key: str
    path: tuple[str, ...]
    parent: RefTask | None
    stream: int | None
    call_id: str | None
    state: str = "queued"
    children: list[RefTask] = attrs.field(factory=list)
    holds: bool = False
    turns: int = 0
    deadline: float | None = None
    child: RefTask | None = None
    cancel_called: bool = False
    abort_as: str | None = None
    ended: bool = False
    done: bool = False
    output: str | None = None
    delivered: list[str] = attrs.field(factory=list)

    def __repr__(self) -> str:
        return f"<RefTask {'/'.join(self.path)} {self.state}>"

    @property
    def status(self) -> str:
        """The ``TaskStatus`` value the real task must have."""
        return "running" if self.state in _RUNNING else self.state


@attrs.define(eq=False)
class Waiter:
    """A submit blocked on the full queue (``woken``: unparked, not retried yet)."""

    sid: int
    name: str
    key: str
    parent_path: tuple[str, ...]
    stream: int | None
    woken: bool = False


Outcome = RefTask | str
"""What a submit gives: the task, ``WAITING``, or the name of the error it raises."""


class RefPool:
    """The reference pool: mutate it with the operations, read what must hold after each.

    Args:
      max_concurrent, max_queued, max_depth: The pool's limits.
      max_turns: Model calls per run (both specs).
      timeout: Spec ``w``'s timeout in seconds, or None.
      streams: How many streams there are (0 is the pool's).
    """

    def __init__(
        self,
        *,
        max_concurrent: int,
        max_queued: int,
        max_depth: int,
        max_turns: int,
        timeout: float | None,
        streams: int = 3,
    ) -> None:
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self.max_depth = max_depth
        self.max_turns = max_turns
        self.timeout = timeout
        self.open = [True] * streams
        self.now = 0.0
        self.tasks: list[RefTask] = []
        self.live: dict[tuple[str, ...], RefTask] = {}
        self.queue: deque[RefTask] = deque()
        self.reacquiring: deque[RefTask] = deque()
        self.holding = self.running = self.finished = self.failed = self.cancelled = 0
        self.closed = self.aborted = False
        self.waiter: Waiter | None = None
        self.cancelled_roots: set[tuple[str, ...]] = set()
        self.outcomes: dict[int, Outcome] = {}
        self._ready: deque[Callable[[], None]] = deque()

    # -- what must hold ----------------------------------------------------------------

    def statistics(self) -> PoolStatistics:
        """What ``Pool.statistics()`` must be (field for field)."""
        return PoolStatistics(
            running=self.running,
            queued=len(self.queue),
            finished=self.finished,
            failed=self.failed,
            cancelled=self.cancelled,
            accepted=len(self.tasks),
            holding_slots=self.holding,
            waiting_submitters=0 if self.waiter is None else 1,
            max_concurrent=self.max_concurrent,
            max_queued=self.max_queued,
            max_depth=self.max_depth,
            closed=self.closed,
        )

    def in_model_call(self) -> list[RefTask]:
        """The tasks blocked in a model call, in acceptance order."""
        return [t for t in self.tasks if t.state == "model"]

    # -- operations --------------------------------------------------------------------

    def submit(
        self,
        sid: int,
        name: str,
        key: str,
        parent_path: tuple[str, ...],
        stream: int | None,
        *,
        wait: bool,
    ) -> Outcome:
        """``submit`` (``wait``) or ``submit_nowait`` from outside the pool, as number ``sid``."""
        outcome = self._accept(name, key, parent_path, stream, None, None)
        if outcome == "WouldBlock" and wait:
            assert self.waiter is None, "the harness allows one blocked submit at a time"
            self.waiter = Waiter(sid, name, key, parent_path, stream)
            outcome = WAITING
        self.outcomes[sid] = outcome
        self._settle()
        return outcome

    def cancel_waiter(self) -> None:
        """Cancel the blocked submit's caller: no trace in the pool."""
        assert self.waiter is not None and not self.waiter.woken
        self.outcomes[self.waiter.sid] = "Cancelled"
        self.waiter = None

    def close(self) -> None:
        """``pool.close()``."""
        self.closed = True
        self._unpark()
        self._settle()

    def cancel(self) -> None:
        """``pool.cancel()``."""
        self.closed = True
        self._unpark()
        self.aborted = True
        for task in list(self.live.values()):
            self._cancel_one(task)
        self._settle()

    def cancel_task(self, task: RefTask) -> None:
        """``task.cancel()``: the task and every task below it, and any task submitted
        below its path later."""
        self._cancel_tree(task)
        self._settle()

    def close_stream(self, index: int) -> None:
        """``Stream.close()`` of stream ``index``: later events are not delivered."""
        self.open[index] = False

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass: runs past their deadline time out."""
        target = self.now + seconds
        while True:
            due = [t for t in self.live.values()
                   if t.deadline is not None and t.deadline <= target and t.abort_as is None]
            if not due:
                break
            self.now = min(t.deadline for t in due if t.deadline is not None)
            for task in due:
                if task.deadline == self.now:
                    task.abort_as = "timed_out"
                    self._abort(task)
            self._settle()
        self.now = target

    def complete(self, task: RefTask) -> None:
        """The task's model call answers without tool calls."""
        assert task.state == "model"
        self._emit(task, "model_response", "agent_end")
        task.output = f"out {task.key}"
        self._end(task, "finished")
        self._settle()

    def fail(self, task: RefTask) -> None:
        """The task's model call raises a (non-transient) ``ModelError``."""
        assert task.state == "model"
        self._emit(task, "error", "agent_end")
        self._end(task, "failed")
        self._settle()

    def can_delegate(self, task: RefTask, name: str) -> bool:
        """Whether the task may delegate to ``name`` now without its submit blocking."""
        if name not in (ROOT, SUB) or len(task.path) >= self.max_depth:
            return True
        # Lending its slot starts at most one queued task (none if a parent is waiting
        # to take a slot back).
        after = len(self.queue) - (1 if self.queue and not self.reacquiring else 0)
        return after < self.max_queued

    def delegate(self, task: RefTask, name: str, key: str) -> str:
        """The task's model call asks the delegation tool to run ``name`` on ``key`` and
        wait; returns the tool call's id."""
        assert task.state == "model"
        call_id = f"{task.key}/{task.turns}"
        self._emit(task, "model_response", "tool_start")
        if len(task.path) >= self.max_depth:
            # The tool is not offered at the depth limit: an unknown-tool error result.
            self._emit(task, "tool_end")
            self._next_turn(task)
        else:
            self._emit(task, "gate_decision")
            self._release(task)
            child = self._accept(name, key, task.path, None, call_id, task)
            if isinstance(child, RefTask):
                task.state = "delegating"
                task.child = child
            else:
                assert child == "UnknownAgentError", child
                self._wake(task)
        self._settle()
        return call_id

    # -- the pool's bookkeeping --------------------------------------------------------

    def _accept(
        self,
        name: str,
        key: str,
        parent_path: tuple[str, ...],
        stream: int | None,
        call_id: str | None,
        caller: RefTask | None,
    ) -> Outcome:
        if name not in (ROOT, SUB):
            return "UnknownAgentError"
        if len(parent_path) >= self.max_depth:
            return "MaxDepthError"
        if self.aborted:
            return "PoolClosedError"
        parent = self.live.get(parent_path) if parent_path else None
        if self.closed and not (caller is not None and caller is parent
                                and caller.state in _RUNNING):
            return "PoolClosedError"
        if len(self.queue) >= self.max_queued:
            return "WouldBlock"
        if stream is None:
            stream = parent.stream if parent is not None else 0
        assert parent is None or not parent.cancel_called, "the harness avoids this window"
        path = (*parent_path, f"{name}/{len(self.tasks) + 1:04d}")
        task = RefTask(name, key, path, parent, stream, call_id)
        self.tasks.append(task)
        self.live[path] = task
        self.queue.append(task)
        if parent is not None:
            parent.children.append(task)
        self._emit(task, "task_queued")
        self._pump()
        if any(parent_path[:depth] in self.cancelled_roots
               for depth in range(1, len(parent_path) + 1)):
            self._cancel_one(task)
        return task

    def _emit(self, task: RefTask, *kinds: str) -> None:
        if task.stream is not None and self.open[task.stream]:
            task.delivered.extend(kinds)

    def _settle(self) -> None:
        while self._ready:
            self._ready.popleft()()

    def _unpark(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.woken:
            waiter.woken = True
            self._ready.append(self._retry)

    def _retry(self) -> None:
        waiter = self.waiter
        assert waiter is not None
        # Not parked while it retries: an unpark by its own accept wakes nobody.
        outcome = self._accept(waiter.name, waiter.key, waiter.parent_path, waiter.stream,
                               None, None)
        if outcome == "WouldBlock":
            waiter.woken = False
        else:
            self.outcomes[waiter.sid] = outcome
            self.waiter = None

    def _pump(self) -> None:
        while self.holding < self.max_concurrent:
            if self.reacquiring:
                task = self.reacquiring.popleft()
                task.state = "granted"
                self._ready.append(functools.partial(self._resume, task))
            elif self.queue:
                task = self.queue.popleft()
                task.state = "starting"
                self.running += 1
                self._unpark()
                self._ready.append(functools.partial(self._start, task))
            else:
                return
            self.holding += 1
            task.holds = True

    def _release(self, task: RefTask) -> None:
        if task.holds:
            task.holds = False
            self.holding -= 1
            self._pump()

    def _start(self, task: RefTask) -> None:
        if task.abort_as is not None:
            self._end(task, task.abort_as)
            return
        self._emit(task, "task_started", "agent_start", "turn_start", "model_request")
        task.turns = 1
        task.state = "model"
        if task.name == ROOT and self.timeout is not None:
            task.deadline = self.now + self.timeout

    def _next_turn(self, task: RefTask) -> None:
        if task.turns >= self.max_turns:
            self._emit(task, "agent_end")
            task.output = ""
            self._end(task, "finished")
            return
        task.turns += 1
        self._emit(task, "turn_start", "model_request")
        task.state = "model"

    def _wake(self, task: RefTask) -> None:
        # Its delegation returned: take a slot back (kept if the subagent handed its own).
        if task.holds:
            self._resume(task)
            return
        task.state = "reacquiring"
        self.reacquiring.append(task)
        self._pump()

    def _resume(self, task: RefTask) -> None:
        if task.abort_as is not None:
            return
        self._emit(task, "tool_end")
        self._next_turn(task)

    def _cancel_tree(self, task: RefTask) -> None:
        # Every Task.cancel() of the pool, explicit or a cascade: later submits below
        # this path are cancelled too.
        self.cancelled_roots.add(task.path)
        stack = [task]
        while stack:
            one = stack.pop()
            self._cancel_one(one)
            stack.extend(one.children)

    def _cancel_one(self, task: RefTask) -> None:
        task.cancel_called = True
        if task.state == "queued":
            self.queue.remove(task)
            self._unpark()
            task.state = "cancelled"
            self.cancelled += 1
            self._ready.append(lambda: self._end(task, "cancelled", counted=True))
        elif task.state in _RUNNING and task.abort_as is None:
            task.abort_as = "cancelled"
            self._abort(task)

    def _abort(self, task: RefTask) -> None:
        # Its run is cancelled (by a cancel, or its timeout).
        if task.state in ("model", "granted"):
            self._ready.append(lambda: self._run_ended(task))
        elif task.state == "reacquiring":
            self.reacquiring.remove(task)
            self._ready.append(lambda: self._run_ended(task))
        elif task.state == "delegating" and task.abort_as == "timed_out":
            # Its delegation tool cancels the subagent; the run ends once that resolved.
            assert task.child is not None
            self._cancel_tree(task.child)

    def _run_ended(self, task: RefTask) -> None:
        assert task.abort_as is not None
        self._emit(task, "agent_end")
        self._end(task, task.abort_as)

    def _end(self, task: RefTask, status: str, *, counted: bool = False) -> None:
        # run_task's end: the slot (straight to a parent waiting for this task alone),
        # the count, a hard end's cascade, then the task resolves.
        task.deadline = None
        parent = task.parent
        if (task.holds and parent is not None and parent.state == "delegating"
                and parent.child is task and not parent.holds and not parent.cancel_called):
            task.holds = False
            parent.holds = True
        else:
            self._release(task)
        if not counted:
            self.running -= 1
            task.state = status
            if status == "finished":
                self.finished += 1
            elif status == "cancelled":
                self.cancelled += 1
            else:
                self.failed += 1
        task.ended = True
        if status == "cancelled":
            self._cancel_tree(task)
        self._resolve(task)

    def _resolve(self, task: RefTask) -> None:
        # A cancelled task resolves after every descendant its cancel reached.
        if task.done or not task.ended:
            return
        if task.state == "cancelled" and any(not c.done for c in task.children):
            return
        self._emit(task, "task_cancelled" if task.state == "cancelled" else "task_finished")
        task.done = True
        del self.live[task.path]
        parent = task.parent
        if parent is None:
            return
        if parent.state == "delegating" and parent.child is task:
            parent.child = None
            if parent.abort_as is not None:
                self._ready.append(lambda: self._run_ended(parent))
            else:
                self._ready.append(lambda: self._wake(parent))
        if parent.ended:
            self._ready.append(lambda: self._resolve(parent))
