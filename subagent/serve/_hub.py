"""Hub: the server's hold on one pool: the tasks it started or resumed, the trees
waiting for a human, the event log and the live tree, and the actions the endpoints
take on them. The HTTP layer (``_app``) only parses, checks and calls these."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import msgspec
import trio

import agentcore
import subagent
from agentcore import Message, RunState

from . import _wire
from ._log import EventLog
from ._tree import LiveTree

#: The most root tasks the server remembers (the oldest ended ones are forgotten).
MAX_TASKS = 10_000
#: The most event streams open at once.
MAX_READERS = 64
#: How long a submit waits for room in a full queue before it is refused (seconds).
SUBMIT_WAIT = 5.0


class ServeError(subagent.SubagentError):
    """A request the server refuses; ``status`` is its HTTP status code."""

    status = 400


class NotFoundError(ServeError):
    """No such task, tree or call."""

    status = 404


class ConflictError(ServeError):
    """The request does not fit the state of the thing it names (a tree resumed
    already, a task that ended)."""

    status = 409


class BusyError(ServeError):
    """The pool cannot take the request now (its queue stayed full, it is closed)."""

    status = 503


_LIVE = (subagent.TaskStatus.queued, subagent.TaskStatus.running)


@attrs.define(eq=False)
class TaskEntry:
    """A root task the server knows: one it started, resumed or recovered."""

    id: str
    agent: str
    task: subagent.Task | None
    status: str = "queued"
    output: str | None = None
    error: str | None = None
    usage: agentcore.Usage | None = None

    def wire(self) -> dict[str, Any]:
        """The entry as JSON-ready data (its status now)."""
        status = self.status
        if self.task is not None and status in ("queued", "running"):
            # Until its follower records how it ended (its result with it), an ended
            # task still shows running: a status of finished always comes with its output.
            live = self.task.status
            status = str(live) if live in _LIVE else "running"
        out: dict[str, Any] = {"id": self.id, "agent": self.agent, "status": status,
                               "output": self.output, "error": self.error}
        out["usage"] = None if self.usage is None else _wire.usage(self.usage)
        return out


@attrs.define(eq=False)
class Waiting:
    """A paused tree waiting for a human's answers: answered under ``lock``, resumed
    once, when no call of it waits any more."""

    name: str
    state: RunState
    task_id: str
    lock: trio.Lock = attrs.Factory(trio.Lock)


@attrs.frozen
class ServeStatistics:
    """A snapshot of a server's own counts."""

    events: int
    """Events logged since the start (the last event id)."""
    held: int
    """Events the log holds now (at most ``max_events``)."""
    max_events: int
    """The log's bound."""
    readers: int
    """Event streams open now."""
    dropped: int
    """Events that readers missed because they fell behind (each reader's own)."""
    waiting_trees: int
    """Paused trees waiting for answers."""
    tasks: int
    """Root tasks known."""


@attrs.define(eq=False)
class Reader:
    """One open event stream's counts."""

    sent: int = 0
    dropped: int = 0


class _Call(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    name: str
    arguments: str = "{}"


class _History(msgspec.Struct, forbid_unknown_fields=True):
    role: str
    content: str = ""
    tool_calls: list[_Call] = []
    tool_call_id: str | None = None
    is_error: bool = False


def history_of(items: list[_History]) -> list[Message]:
    """The messages of a submit's ``history`` (the pool checks them further)."""
    try:
        return [Message(h.role, h.content,  # type: ignore[arg-type]
                        tuple(agentcore.ToolCall(c.id, c.name, c.arguments)
                              for c in h.tool_calls),
                        h.tool_call_id, h.is_error) for h in items]
    except ValueError as exc:
        raise ServeError(f"history: {exc}") from None


class Hub:
    """The server's state over ``pool`` (see the module docstring). ``budget`` is the
    pool's budget (shown with what is left of it); ``max_events`` bounds the log."""

    def __init__(self, pool: subagent.Pool, *, budget: subagent.Budget | None,
                 max_events: int, recover: bool) -> None:
        if pool.events is None:
            raise ServeError("the pool has no event stream: open_pool(events=subagent.Stream(...))")
        self.pool = pool
        self.budget = budget
        self.log = EventLog(max_events)
        self.tree = LiveTree()
        self.tasks: dict[str, TaskEntry] = {}
        self.waiting: dict[str, Waiting] = {}
        self.readers: dict[int, Reader] = {}
        self.failed: list[tuple[str, str]] = []
        self._recover = recover
        self._reader_ids = itertools.count(1)
        self._dropped_closed = 0
        self._nursery: trio.Nursery | None = None

    # -- life ----------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
                  ) -> None:
        """Read the pool's events and watch its tasks until cancelled; with the pool's
        checkpoints (and ``recover``), first resume what a crash left and list the
        trees waiting for answers. Started once it is ready. A checkpoint."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._pump)
                if self._recover and self.pool.checkpoints is not None:
                    await self._recovered(await self.pool.recover())
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self.log.close()

    async def _pump(self) -> None:
        # Never waits on a reader: the log takes each event at once.
        events = self.pool.events
        assert events is not None
        async for ev in events:
            self.tree.update(ev)
            self.log.append(ev.path, msgspec.json.encode(_wire.event(ev)))

    async def _recovered(self, recovered: subagent.Recovered) -> None:
        for task in recovered:
            self._watch(task)
        for tree in recovered.paused:
            task_id = "/".join(tree.state.path)
            self.tasks[task_id] = TaskEntry(task_id, tree.name, None, "paused")
            self.waiting[tree.state.run_id] = Waiting(tree.name, tree.state, task_id)
            self.tree.add_paused(tree.state)
        for run_id, error in recovered.failed:
            self.failed.append((run_id, _wire.clip(str(error))))

    def _watch(self, task: subagent.Task) -> TaskEntry:
        if self._nursery is None:
            raise BusyError("the server is not running")
        entry = TaskEntry("/".join(task.path), task.name, task, "queued")
        self.tasks.pop(entry.id, None)  # a resumed task: its entry goes to the end
        self.tasks[entry.id] = entry
        if len(self.tasks) > MAX_TASKS:
            ended = next((k for k, e in self.tasks.items()
                          if e.task is not None and e.task.done), None)
            if ended is not None:
                del self.tasks[ended]
        self._nursery.start_soon(self._follow, entry, task)
        return entry

    async def _follow(self, entry: TaskEntry, task: subagent.Task) -> None:
        try:
            result = await task.wait()
        except subagent.TaskPaused as paused:
            entry.status = "paused"
            self.waiting[paused.state.run_id] = Waiting(task.name, paused.state, entry.id)
        except subagent.TaskError as exc:
            entry.status, entry.error = str(task.status), _wire.clip(str(exc))
        else:
            entry.status, entry.output, entry.usage = "finished", result.output, result.tree_usage

    # -- actions -------------------------------------------------------------

    async def submit(self, agent: str, text: str, history: list[Message]) -> TaskEntry:
        """Start a root task; waits at most ``SUBMIT_WAIT`` for room. A checkpoint.

        Raises:
          ServeError: unknown agent or bad history; BusyError: no room, or closed.
        """
        with trio.move_on_after(SUBMIT_WAIT):
            try:
                task = await self.pool.submit(agent, text, history=history)
            except subagent.UnknownAgentError as exc:
                raise NotFoundError(str(exc)) from None
            except subagent.PoolClosedError as exc:
                raise BusyError(str(exc)) from None
            except subagent.SubagentError as exc:
                raise ServeError(str(exc)) from None
            return self._watch(task)
        raise BusyError(f"the pool's queue stayed full for {SUBMIT_WAIT:g}s: try again later")

    def cancel(self, task_id: str) -> TaskEntry:
        """Cancel a live root task and its whole tree. Not a checkpoint.

        Raises:
          NotFoundError: no such task; ConflictError: it ended, or waits for answers.
        """
        entry = self.entry(task_id)
        if entry.task is None or entry.task.done:
            raise ConflictError(f"task {task_id!r} is {entry.wire()['status']}: nothing to cancel")
        entry.task.cancel()
        return entry

    def entry(self, task_id: str) -> TaskEntry:
        """The root task ``task_id``. Raises NotFoundError."""
        found = self.tasks.get(task_id)
        if found is None:
            raise NotFoundError(f"no task {task_id[:200]!r}")
        return found

    def approvals(self) -> list[dict[str, Any]]:
        """Every call waiting for an answer, tree by tree, with its exact arguments."""
        return [_wire.approval(tree, w.name, p)
                for tree, w in self.waiting.items() for p in w.state.pending_approvals]

    async def answer(self, tree: str, call_id: str, path: list[str] | None, *, allow: bool,
                     reason: str, by: str) -> dict[str, Any]:
        """Approve or deny one call of the paused tree ``tree`` (its root run id),
        durably (``Pool.answer``: with checkpoints, stored before this returns, and
        recorded in the ledger with ``by``); once none waits, resume the tree (once: a
        second answer finds it gone). A checkpoint.

        Raises:
          ConflictError: the tree is not waiting (resumed already, or unknown), the
            answer cannot be stored, or the pool refuses to resume it; NotFoundError:
            it has no such call.
        """
        waiting = self.waiting.get(tree)
        gone = ConflictError(
            f"no paused tree {tree[:200]!r} waits for answers: it was resumed already "
            "(its approved calls run once) or never paused here")
        if waiting is None:
            raise gone
        async with waiting.lock:
            if self.waiting.get(tree) is not waiting:
                raise gone
            where = None if path is None else tuple(path)
            try:
                await self.pool.answer(waiting.state, call_id, allow=allow, reason=reason,
                                       by=by, path=where, name=waiting.name)
            except agentcore.RunStateError as exc:
                raise NotFoundError(str(exc)) from None
            except subagent.AlreadyResumedError as exc:
                del self.waiting[tree]
                raise ConflictError(str(exc)) from None
            except agentcore.AuditError as exc:
                raise BusyError(f"the answer is kept, but the ledger cannot record it: "
                                f"{exc}; answer again") from None
            except (subagent.SubagentError, agentcore.AgentCoreError) as exc:
                raise ConflictError(f"the answer cannot be kept: {exc}") from None
            left = len(waiting.state.pending_approvals)
            if left:
                return {"resumed": None, "waiting": left}
            del self.waiting[tree]
            try:
                task = await self.pool.resume(waiting.state, name=waiting.name)
            except subagent.AlreadyResumedError as exc:
                raise ConflictError(str(exc)) from None
            except (subagent.SubagentError, agentcore.AgentCoreError) as exc:
                self.waiting[tree] = waiting  # nothing ran: still listed, still answerable
                raise ConflictError(f"the tree cannot be resumed: {exc}") from None
            entry = self._watch(task)
            return {"resumed": entry.id, "waiting": 0}

    # -- reading -------------------------------------------------------------

    def open_reader(self) -> tuple[int, Reader]:
        """Register an event stream; returns its number and counts.

        Raises:
          BusyError: ``MAX_READERS`` streams are open.
        """
        if len(self.readers) >= MAX_READERS:
            raise BusyError(f"{MAX_READERS} event streams are open: close one first")
        number = next(self._reader_ids)
        reader = self.readers[number] = Reader()
        return number, reader

    def close_reader(self, number: int) -> None:
        """Forget an event stream (its drops stay counted)."""
        reader = self.readers.pop(number, None)
        if reader is not None:
            self._dropped_closed += reader.dropped

    def statistics(self) -> ServeStatistics:
        """The server's own counts now."""
        return ServeStatistics(
            events=self.log.last_id, held=self.log.held, max_events=self.log.max_events,
            readers=len(self.readers),
            dropped=self._dropped_closed + sum(r.dropped for r in self.readers.values()),
            waiting_trees=len(self.waiting), tasks=len(self.tasks),
        )

    def budget_left(self) -> dict[str, Any] | None:
        """The pool budget's limits, what the pool counts spent (after a restart, with
        what the recovered trees had spent) and what is left (``None``: the pool has no
        budget)."""
        if self.budget is None:
            return None
        spend = self.pool.budget_spend()
        out = {}
        for name, allowed in self.budget.limits():
            used = None if spend is None else getattr(spend, name)
            out[name] = {"limit": allowed, "spent": used,
                         "left": None if used is None else max(0, allowed - used)}
        return out
