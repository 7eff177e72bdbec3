"""Running one root task and its subtree on a fresh trio pool, inside an activity.

:func:`run_tree` is the trio side of the activity: it opens a pool for the specs,
submits the root (or resumes a paused tree with the humans' answers: see
:mod:`._paused`), and until the root resolves

- forwards every event, encoded, to the workflow in batches (:class:`Outbox`): the
  pool's stream is drained at once, so backpressure stops here; the outbox keeps at
  most :data:`MAX_PENDING` unsent events and drops the oldest beyond that;
- heartbeats a :class:`~._resume.Heartbeat` at every turn boundary and every
  :data:`TICK` seconds (a cancel reaches an activity only through a heartbeat);
- polls the activity's cancel flag and, once it is set, cancels the root
  (``Task.cancel()``: the cascading hard abort of the whole tree);
- polls the workflow's controls (interrupt, steer) and applies them to the root,
  and reports the status of every task of the tree with the event batches;
- polls whether the worker is closing: from then on every wait on the server (a
  signal, a recorded heartbeat, the last events) ends by the worker's close deadline,
  and what the server did not acknowledge by then is written to the ledger
  (a ``worker_closed`` entry).

A tree that pauses (``TaskPaused``) ends the activity with its state.

The Temporal side is behind a :class:`Link` (three callables), so this module
imports no temporalio.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import attrs
import trio

import agentcore
import ledger
from agentcore import ToolGate

from .._core._core import CancelCause
from .._delegation._results import SubagentResultsTool
from .._delegation._tool import SubagentTool
from .._durable._recovery import recover
from .._durable._store import CheckpointError
from .._errors import TaskCancelled, TaskError, TaskPaused, TaskTimeout, UnknownAgentError
from .._events import Event
from .._ledgerfile import open_sink
from .._pool._open import open_pool
from .._pool._pool import Pool
from .._pool._task import Task
from .._specs._file import SpecFile
from .._stream import Stream
from ._checkpointing import HeartbeatCheckpoints
from ._errors import StateTooLarge
from ._inputs import (
    ActivityInput,
    ActivityResult,
    ApprovalRequest,
    Control,
    EventBatch,
    RootResult,
    wire_size,
)
from ._live import poll_controls, tree_statuses
from ._paused import encode_pause, resumed_state
from ._resume import Heartbeat, last_heartbeat, start_state
from ._wire import MAX_EVENT_BYTES, encode_event

#: Seconds between timer heartbeats and cancel checks.
TICK = 0.1
#: Unsent events the outbox keeps while the workflow cannot be reached (oldest dropped).
MAX_PENDING = 4096
#: Events in one signal.
BATCH = 256
#: Characters of encoded events in one signal, or in the activity's result (at least
#: one event): Temporal refuses payloads over 2 MiB by default.
MAX_BATCH_CHARS = 512 * 1024
#: The largest root answer an activity's result carries, as sent (:func:`wire_size`;
#: with the last batch of events, under Temporal's 2 MiB); a larger one fails the run.
MAX_ANSWER_BYTES = 1024 * 1024
#: Seconds between heartbeats recorded on a timer when ``Link.record`` is set (each
#: checkpoint is recorded at once besides).
RECORD_EVERY = 1.0
#: Seconds one signal (or one recorded heartbeat) may take before it is tried again.
SEND_TIMEOUT = 10.0
#: Seconds the last events may take to reach the workflow once the root resolved (what
#: is still unsent then is dropped, but for the batch the activity's result carries).
FINAL_FLUSH_TIMEOUT = 30.0


def _not_closing() -> float | None:
    return None


@attrs.frozen
class Link:
    """The activity's ties to Temporal.

    Attributes:
      send: Signals a batch to the workflow (a checkpoint; may raise on failure).
      heartbeat: Records a heartbeat payload (not a checkpoint; throttled by the SDK).
      cancelled: Whether Temporal asked the activity to cancel.
      attempt: This activity attempt (from 1).
      details: The heartbeat details a retried attempt received.
      controls: Fetches the workflow's controls from a number on (a checkpoint);
        ``None``: none are polled.
      record: Records a heartbeat payload on the server and returns once it is
        recorded, ``True`` when the server asks the activity to stop (a checkpoint;
        may raise). When set, every heartbeat goes through it (carrying the tree's
        checkpoints) and ``heartbeat`` is used only once a stop was asked for (so
        that the SDK learns of the cancel); ``None``: ``heartbeat`` only, no state.
      closing: Seconds left until the worker's close deadline once the worker is
        closing, else ``None`` (not a checkpoint; called from the tree's thread): from
        then on no wait on the server outlasts the deadline.
    """

    send: Callable[[EventBatch], Awaitable[None]]
    heartbeat: Callable[[dict[str, object]], None]
    cancelled: Callable[[], bool]
    attempt: int = 1
    details: tuple[object, ...] = ()
    controls: Callable[[int], Awaitable[list[Control]]] | None = None
    record: Callable[[dict[str, object]], Awaitable[bool]] | None = None
    closing: Callable[[], float | None] = _not_closing


class Cancelled(Exception):
    """The root was cancelled because Temporal cancelled the activity."""


@attrs.define
class Outbox:
    """Encoded events not yet signalled to the workflow, sent in order, once each."""

    link: Link
    pending: list[str] = attrs.Factory(list)
    #: The size of each pending event as sent (:func:`wire_size`).
    sizes: list[int] = attrs.Factory(list)
    seq: int = 0
    sent: int = 0
    dropped: int = 0
    turns: int = 0
    round: int = 0
    tasks: dict[str, str] | None = None
    sent_tasks: dict[str, str] = attrs.Factory(dict)
    #: ``applied[0]``: the first control not applied yet (shared with the poller).
    applied: list[int] = attrs.Factory(lambda: [0])
    sent_applied: int = 0
    lock: trio.Lock = attrs.Factory(trio.Lock)
    #: The tree's last checkpoints (``HeartbeatCheckpoints.encoded``), if any.
    state: str | None = None
    #: The server asked the activity to stop (seen through ``Link.record``).
    stop: bool = False
    beat_lock: trio.Lock = attrs.Factory(trio.Lock)
    #: When (trio time) the worker's close ends every wait on the server (``inf``:
    #: the worker is not closing).
    close_at: float = math.inf
    #: Waits on the server (signals, recorded heartbeats) the close deadline cut short.
    cut: int = 0
    #: The scopes of the waits on the server under way (the close deadline moves theirs).
    waits: set[trio.CancelScope] = attrs.Factory(set)

    @contextlib.contextmanager
    def server_wait(self, seconds: float) -> Iterator[None]:
        """Bound a wait on the server to ``seconds``, and to the worker's close deadline
        (even one set while it waits). Not a checkpoint.

        Raises:
          trio.TooSlowError: the wait did not end in time (counted in :attr:`cut` when
            the close deadline ended it).
        """
        scope = trio.CancelScope(deadline=min(trio.current_time() + seconds, self.close_at))
        self.waits.add(scope)
        try:
            with scope:
                yield
        finally:
            self.waits.discard(scope)
        if scope.cancelled_caught:
            if scope.deadline >= self.close_at:
                self.cut += 1
            raise trio.TooSlowError

    def closing(self, left: float) -> None:
        """The worker closes in ``left`` seconds: no wait on the server outlasts that.
        Not a checkpoint."""
        self.close_at = min(self.close_at, trio.current_time() + max(left, 0.0))
        for scope in self.waits:
            scope.deadline = min(scope.deadline, self.close_at)

    def statuses(self, tasks: dict[str, str]) -> None:
        """Send ``tasks`` with the next batch, if they changed since the last one sent."""
        if tasks != self.sent_tasks:
            self.tasks = tasks

    def put(self, event: Event) -> None:
        text = encode_event(event)
        size = wire_size(text)
        if size > MAX_EVENT_BYTES:  # a follower would refuse it: counted, not sent
            self.dropped += 1
            return
        self.pending.append(text)
        self.sizes.append(size)
        if len(self.pending) > MAX_PENDING:
            del self.pending[0], self.sizes[0]
            self.dropped += 1

    def _batch(self) -> list[str]:
        batch: list[str] = []
        size = 0
        for text, chars in zip(self.pending[:BATCH], self.sizes, strict=False):
            if batch and size + chars > MAX_BATCH_CHARS:
                break
            batch.append(text)
            size += chars
        return batch

    def tail_fits(self) -> bool:
        """Whether every pending event fits the activity's result (the last batch, at
        most :data:`MAX_BATCH_CHARS` as sent). Not a checkpoint."""
        return len(self.pending) <= BATCH and sum(self.sizes) <= MAX_BATCH_CHARS

    async def flush_once(self) -> bool:
        """Send one batch; ``False`` if it failed (kept for the next try). A checkpoint."""
        try:
            with self.server_wait(math.inf):  # the lock's holder waits on the server
                async with self.lock:
                    return await self._flush_once()
        except trio.TooSlowError:
            return False

    async def _flush_once(self) -> bool:
        if not self.pending and self.tasks is None and self.applied[0] == self.sent_applied:
            return True
        batch = self._batch()
        dropped = self.dropped
        tasks, applied = self.tasks, self.applied[0]
        try:
            with self.server_wait(SEND_TIMEOUT):
                await self.link.send(
                    EventBatch(self.link.attempt, self.seq, batch, self.round, tasks, applied))
        except Exception:
            return False
        self.sent_applied = applied
        if tasks is not None:
            self.sent_tasks = tasks
            if self.tasks is tasks:
                self.tasks = None
        # Events dropped meanwhile (outbox full) came off the front of this batch.
        sent = max(0, len(batch) - (self.dropped - dropped))
        del self.pending[:sent], self.sizes[:sent]
        self.seq += 1
        self.sent += len(batch)
        return True

    def heartbeat(self) -> None:
        """Heartbeat through the SDK (throttled, not awaited). Not a checkpoint."""
        self.link.heartbeat(self._payload())

    def _payload(self) -> dict[str, object]:
        return Heartbeat(self.link.attempt, self.sent + len(self.pending), self.turns,
                         self.state).payload()

    async def record(self, state: str | None = None) -> None:
        """Record a heartbeat (with ``state``, the tree's new checkpoints, if given)
        on the server before returning. A checkpoint.

        Raises:
          trio.TooSlowError: not recorded within :data:`SEND_TIMEOUT` (nor by the
            worker's close deadline).
        """
        assert self.link.record is not None
        with self.server_wait(math.inf):  # the lock's holder waits on the server
            async with self.beat_lock:
                if state is not None:
                    self.state = state
                with self.server_wait(SEND_TIMEOUT):
                    if await self.link.record(self._payload()):
                        self.stop = True


def _usage_tokens(usage: agentcore.Usage) -> tuple[int, int]:
    return usage.input_tokens, usage.output_tokens


@attrs.define
class _Ending:
    """How the root resolved, as the activity reports it."""

    result: RootResult | None = None
    cancelled: bool = False
    state: str | None = None
    pending: list[ApprovalRequest] = attrs.Factory(list)


async def _outcome(task: Task, ending: _Ending) -> None:
    """Wait for the root and record how it ended. A checkpoint."""
    try:
        done = await task.wait()
    except TaskCancelled as exc:
        ending.cancelled = True
        ending.result = RootResult("cancelled", "", str(exc), *_usage_tokens(task.tree_usage))
    except TaskPaused as exc:
        usage = _usage_tokens(task.tree_usage)
        try:
            ending.state, ending.pending = encode_pause(exc.state)
        except StateTooLarge as too_large:
            ending.result = RootResult("failed", "", str(too_large), *usage)
        else:
            ending.result = RootResult("paused", "", str(exc), *usage)
    except TaskError as exc:
        status = "timed_out" if isinstance(exc, TaskTimeout) else "failed"
        ending.result = RootResult(status, "", str(exc), *_usage_tokens(task.tree_usage))
    else:
        ending.result = RootResult("finished", done.output, None,
                                   *_usage_tokens(done.tree_usage))


async def _record_closed(sink: ledger.Sink, job: ActivityInput, link: Link, cut: int,
                         unsent: int) -> None:
    """Write the ``worker_closed`` entry: the worker's close deadline came before the
    server acknowledged the tree's end (``cut`` waits on it cut short, ``unsent``
    events not signalled). A checkpoint.

    Raises:
      AuditError: the sink refused the entry.
    """
    data: dict[str, str | int | float | bool | None] = {
        "workflow_id": job.workflow_id, "attempt": link.attempt, "cut": cut, "unsent": unsent,
    }
    error = (f"the Temporal server did not acknowledge the tree's end by the worker's "
             f"close deadline: {cut} waits on it cut short, {unsent} events not signalled")
    await agentcore._audit.record(sink, ledger.Record("worker_closed", error=error, data=data))


async def _start(pool: Pool, job: ActivityInput,
                 store: HeartbeatCheckpoints | None) -> Task | RootResult:
    """Resume the tree from the last heartbeat's checkpoints (a retried attempt whose
    predecessor checkpointed), submit the root, or resume the paused tree with the
    answers; a failed result when a state does not fit this worker's specs, or the
    heartbeat shows no running root (the tree ended, or waits for approvals, before
    the attempt was lost: starting over would repeat its calls). A checkpoint."""
    if store is not None and store.resuming:
        try:
            tasks = await recover(pool, store)
        except (CheckpointError, agentcore.ResumeError, UnknownAgentError) as exc:
            return RootResult("failed", "", f"cannot resume from the heartbeat: {exc}")
        if tasks.failed:
            error = tasks.failed[0][1]
            return RootResult("failed", "", f"cannot resume from the heartbeat: {error}")
        if len(tasks) != 1:
            return RootResult("failed", "", "cannot resume from the heartbeat: "
                              f"{len(tasks)} running root tasks in it, not 1")
        return tasks[0]
    if job.state is None:
        return await pool.submit(job.agent, job.task)
    try:
        state = resumed_state(job.state, job.answers)
        return await pool.resume(state)
    except (agentcore.RunStateError, agentcore.ResumeError, UnknownAgentError) as exc:
        return RootResult("failed", "", f"cannot resume the paused run: {exc}")


async def run_tree(
    job: ActivityInput,
    specs: SpecFile,
    link: Link,
    *,
    gate: ToolGate | None,
    ledger_path: Path | None,
) -> ActivityResult:
    """Run ``job``'s root and subtree (or resume it) until it ends or pauses; return
    how it ended and the last events. A checkpoint.

    Raises:
      Cancelled: Temporal cancelled the activity (the tree was aborted first and its
        events were sent).
    """
    names = tuple(sorted(spec.name for spec in specs.specs))
    if job.state is None and job.agent not in names:  # the input came from any client
        error = str(UnknownAgentError(job.agent, names))
        return ActivityResult(RootResult("failed", "", error), link.attempt, 0, [],
                              controls=job.controls_from)
    applied = [job.controls_from]
    outbox = Outbox(link, round=job.round, applied=applied, sent_applied=job.controls_from)
    stream = Stream(256)
    sink = open_sink(ledger_path) if ledger_path is not None else None
    previous = last_heartbeat(link.details)
    try:
        rows = start_state(previous)
    except CheckpointError as exc:
        return ActivityResult(RootResult("failed", "", f"cannot resume from the heartbeat: {exc}"),
                              link.attempt, 0, [], controls=job.controls_from)
    store = None
    if link.record is not None:
        store = HeartbeatCheckpoints("<heartbeat>", record=outbox.record, start=rows or [],
                                     resuming=rows is not None)
    if sink is not None and link.attempt > 1:
        data: dict[str, str | int | float | bool | None] = {
            "workflow_id": job.workflow_id, "attempt": link.attempt,
            "from_turns": previous.turns if previous else 0,
            "resumed_state": rows is not None,
        }
        await agentcore._audit.record(sink, ledger.Record("attempt_resumed", data=data))
    defaults = specs.defaults
    if gate is not None:
        defaults = attrs.evolve(defaults, gate=gate)
    if sink is not None:
        defaults = attrs.evolve(defaults, audit=sink)
    ending = _Ending()
    tail: list[str] = []
    seq = 0
    forwarded = trio.Event()
    try:
        async with trio.open_nursery() as outer:

            async def forward() -> None:
                async for event in stream:
                    outbox.put(event)
                    if event.kind == agentcore.EventKind.turn_start:
                        outbox.turns += 1
                        if link.record is None:  # else the checkpoint was recorded
                            outbox.heartbeat()
                forwarded.set()

            async def flush() -> None:
                while True:  # a run shorter than TICK sends no signal at all
                    await trio.sleep(TICK)
                    await outbox.flush_once()

            async def watch_close() -> None:
                # The worker's close is set on another thread: polled, as the cancel is.
                while (left := link.closing()) is None:  # noqa: ASYNC110
                    await trio.sleep(TICK)
                outbox.closing(left)

            outer.start_soon(forward)
            outer.start_soon(flush)
            outer.start_soon(watch_close)
            async with open_pool(
                **specs.pool, defaults=defaults, events=stream, mcp=specs.mcp,  # type: ignore[arg-type]
                checkpoints=store,
            ) as pool:
                tools: dict[str, agentcore.Tool] = {
                    "subagent": SubagentTool(pool), "subagent_results": SubagentResultsTool(pool),
                }
                for spec in specs.specs_for(tools, pool.mcp_tools):
                    pool.register(spec)
                started = await _start(pool, job, store)
                if isinstance(started, RootResult):
                    ending.result = started
                else:
                    task = started

                    async def watch() -> None:
                        due = 0.0
                        while not link.cancelled():
                            if link.record is None or outbox.stop:
                                outbox.heartbeat()
                            elif trio.current_time() >= due:
                                due = trio.current_time() + RECORD_EVERY
                                with contextlib.suppress(Exception):
                                    await outbox.record()
                            outbox.statuses(tree_statuses(task))
                            await trio.sleep(TICK)
                        task._cancel_for(CancelCause.temporal)

                    async with trio.open_nursery() as inner:
                        inner.start_soon(watch)
                        if link.controls is not None:
                            inner.start_soon(poll_controls, link.controls, task,
                                             job.controls_from, applied)
                        await _outcome(task, ending)
                        inner.cancel_scope.cancel()
                    outbox.statuses(tree_statuses(task))
            stream.close()
            # The pool is closed: every event is in the outbox once ``forward`` ends.
            await forwarded.wait()
            if ending.cancelled:  # the events go by signal: a cancelled activity has no result
                with contextlib.suppress(trio.TooSlowError), outbox.server_wait(
                        FINAL_FLUSH_TIMEOUT):
                    while outbox.pending:
                        if not await outbox.flush_once():
                            await trio.sleep(TICK)
                unsent = len(outbox.pending)
            else:  # the last batch goes in the result; what does not fit goes first
                with contextlib.suppress(trio.TooSlowError), outbox.server_wait(
                        FINAL_FLUSH_TIMEOUT):
                    while not outbox.tail_fits():
                        if not await outbox.flush_once():
                            await trio.sleep(TICK)
                async with outbox.lock:
                    tail, seq = outbox._batch(), outbox.seq
                    unsent = len(outbox.pending) - len(tail)
                    outbox.dropped += unsent  # unreachable workflow
                    outbox.pending.clear()
                    outbox.sizes.clear()
            if sink is not None and outbox.close_at < math.inf and (outbox.cut or unsent):
                await _record_closed(sink, job, link, outbox.cut, unsent)
            outer.cancel_scope.cancel()
    finally:
        if sink is not None:
            with trio.CancelScope(shield=True):
                await sink.aclose()
    result = ending.result
    assert result is not None
    if ending.cancelled:
        raise Cancelled(result.error or "cancelled")
    name = ledger_path.name if ledger_path is not None else ""
    size = wire_size(result.output)
    if size > MAX_ANSWER_BYTES:  # Temporal would refuse the result; the retry cannot resume
        result = RootResult(
            "failed", "", f"the root's answer is {size} bytes as Temporal sends it, over the "
            f"{MAX_ANSWER_BYTES} bytes an activity's result may carry (Temporal refuses "
            "payloads over 2 MiB)", result.input_tokens, result.output_tokens)
    result = dataclasses.replace(result, events=outbox.sent + len(tail), ledger=name)
    return ActivityResult(result, link.attempt, seq, tail, ending.state, ending.pending,
                          applied[0], outbox.tasks or outbox.sent_tasks)
