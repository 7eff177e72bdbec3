"""``subagent.temporal.Worker``: a Temporal worker hosting the specs and the root activity.

Each root activity runs as a **sync activity on its own thread** with its own
``trio.run`` (a fresh pool per attempt). Why not trio guest mode on the worker's
asyncio loop: agent tools are user code, and one that blocks its event loop would
then stall the worker's polling, heartbeats and every other run on it; a thread per
root keeps a run's loop its own, bounds the roots a worker runs by its executor, and
keeps trio and asyncio apart (the only crossings are the event signal and the
recorded heartbeat, scheduled on the worker's loop, and ``activity.heartbeat``,
which is thread-safe).

Closing a worker waits on the server at most :data:`CLOSE_TIMEOUT`: the SDK's
shutdown cancels the running roots, whose aborts record their end and signal their
last events; from the close on, those waits end by the close's deadline (a tree
writes a ``worker_closed`` ledger entry for what the server did not acknowledge),
and the SDK's shutdown, still waiting on the server then (for its completion calls),
is cancelled. The close returns once every root's thread has ended. What the SDK's
core still has in flight then (an activity's completion call, and the SDK's own
tasks awaiting it) is the core's: it ends when the server answers or the client
finds the connection dead (its ``KeepAliveConfig``: 30 s + 15 s by default).

Heartbeats carrying the tree's checkpoints are recorded with the
``RecordActivityTaskHeartbeat`` RPC through the client (by task token), awaited
before the run goes on: ``activity.heartbeat`` only queues a payload that the SDK
sends later (throttled), so a checkpoint taken before a mutating call could still
be unsent when the worker dies, and an older queued payload could overwrite a newer
one on the server. The SDK's own heartbeat is used only after the server asked the
activity to stop, so that ``activity.is_cancelled()`` becomes true. The activity
is declared ``no_thread_cancel_exception``: Temporal never raises into the trio
thread; the runner polls ``activity.is_cancelled()`` and aborts the tree itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import re
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import trio
from temporalio import activity
from temporalio.client import AsyncActivityCancelledError, Client
from temporalio.exceptions import CancelledError
from temporalio.worker import Worker as _TemporalWorker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentcore import ToolGate

from .._ledgerfile import make_private_dirs, state_dir
from .._specs._file import SpecFile
from ._admission import AdmissionWorkflow
from ._admission_check import AdmissionCheck
from ._inputs import ACTIVITY_NAME, ActivityInput, ActivityResult, Control, EventBatch
from ._live import CONTROL_TIMEOUT
from ._tree import SEND_TIMEOUT, TICK, Cancelled, Link, run_tree
from ._workflow import SubagentWorkflow

#: Roots one worker runs at once, unless told otherwise.
DEFAULT_MAX_CONCURRENT_ROOTS = 16
#: Longest time between heartbeats the SDK holds back (also bounds how late a cancel is seen).
HEARTBEAT_THROTTLE = 1.0

#: Seconds one recorded heartbeat (a checkpoint of the tree) may take on the wire.
RECORD_TIMEOUT = SEND_TIMEOUT

#: Seconds a workflow task waits on a worker's sticky queue (the SDK's default).
STICKY_TIMEOUT = 10.0

#: Seconds a worker's close waits on the server: for its roots' aborts (their end
#: checkpoints and last events) and the SDK's shutdown (its completion calls).
CLOSE_TIMEOUT = 15.0

SpecSource = SpecFile | Callable[[], SpecFile]
T = TypeVar("T")


def default_ledger_dir() -> Path:
    """Where workers write ledgers by default: ``<state dir>/temporal``."""
    return state_dir() / "temporal"


def ledger_name(workflow_id: str) -> str:
    """The ledger file name for a workflow id: its safe characters (at most 80) and
    12 hex digits of its SHA-256, so distinct ids never share a file."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", workflow_id)[:80].lstrip(".")
    digest = hashlib.sha256(workflow_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{safe}-{digest}.jsonl"


class _Roots:
    """The roots running on a worker's threads, so that its close can wait for them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[concurrent.futures.Future[None]] = set()
        self._closed = False

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Count the calling thread's root as running until the block ends.

        Raises:
          CancelledError: the worker has closed (no root starts then).
        """
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise CancelledError("the worker has closed")
            self._running.add(done)
        try:
            yield
        finally:
            with self._lock:
                self._running.discard(done)
            done.set_result(None)

    async def close(self) -> None:
        """Start no more roots, and wait until the running ones end. A checkpoint."""
        with self._lock:
            self._closed = True
            running = [asyncio.wrap_future(done) for done in self._running]
        if running:
            await asyncio.wait(running)
        else:
            await asyncio.sleep(0)


class _RootActivity:
    """The root activity: holds what every attempt on this worker shares."""

    def __init__(self, worker: Worker, loop: asyncio.AbstractEventLoop) -> None:
        self._worker = worker
        self._loop = loop

    async def _on_loop(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the worker's asyncio loop and wait for it from trio."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()

        def wake(_: object) -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(done.set)

        future.add_done_callback(wake)
        try:
            await done.wait()
        finally:
            future.cancel()
        return future.result()

    def _send(self, workflow_id: str) -> Callable[[EventBatch], Any]:
        handle = self._worker.client.get_workflow_handle(workflow_id)

        async def send(batch: EventBatch) -> None:
            await self._on_loop(handle.signal("events", batch))

        return send

    def _controls(self, workflow_id: str) -> Callable[[int], Awaitable[list[Control]]]:
        handle = self._worker.client.get_workflow_handle(workflow_id)

        async def controls(number: int) -> list[Control]:
            return await self._on_loop(handle.query(
                "controls", number, result_type=list[Control],
                rpc_timeout=timedelta(seconds=CONTROL_TIMEOUT)))

        return controls

    def _record(self, task_token: bytes) -> Callable[[dict[str, object]], Awaitable[bool]]:
        handle = self._worker.client.get_async_activity_handle(task_token=task_token)

        async def record(payload: dict[str, object]) -> bool:
            try:
                await self._on_loop(handle.heartbeat(
                    payload, rpc_timeout=timedelta(seconds=RECORD_TIMEOUT)))
            except AsyncActivityCancelledError:
                return True
            return False

        return record

    @activity.defn(name=ACTIVITY_NAME, no_thread_cancel_exception=True)
    def run_root(self, job: ActivityInput) -> ActivityResult:
        """Run the root and its subtree in a fresh trio run on this thread."""
        info = activity.info()
        worker = self._worker
        specs = worker.specs() if callable(worker.specs) else worker.specs
        ledger_path = None
        if worker.ledger_dir is not None:
            make_private_dirs(worker.ledger_dir)
            ledger_path = worker.ledger_dir / ledger_name(job.workflow_id)

        def cancelled() -> bool:
            # Also a root the SDK did not cancel by the close's deadline.
            left = worker._close_left()
            return activity.is_cancelled() or (left is not None and left <= 0)

        link = Link(
            send=self._send(job.workflow_id),
            heartbeat=lambda payload: activity.heartbeat(payload),
            cancelled=cancelled,
            attempt=info.attempt,
            details=tuple(info.heartbeat_details),
            controls=self._controls(job.workflow_id),
            record=self._record(info.task_token),
            closing=worker._close_left,
        )
        with worker._roots.running():
            try:
                return trio.run(
                    lambda: run_tree(job, specs, link, gate=worker.gate, ledger_path=ledger_path)
                )
            except Cancelled as exc:
                raise CancelledError(str(exc)) from None


class Worker:
    """A Temporal worker that runs :class:`SubagentWorkflow` roots with the given specs.

    Args:
      client: A connected ``temporalio.client.Client``.
      task_queue: The task queue to poll.
      specs: The agents roots may name: a :class:`~subagent.SpecFile` (shared by every
        run), or a function returning one, called for each activity attempt (fresh
        models and tools per run; read a specs file there).
      gate: The gate every run passes, overriding the specs' defaults (``None``: the
        specs' own).
      ledger_dir: Where each root workflow's ledger goes (one JSON Lines hash chain
        per workflow id, see :func:`ledger_name`); ``None``: no ledger.
      max_concurrent_roots: Roots this worker runs at once (its activity slots and
        threads). For a cluster-wide bound see ``RunOptions.admission``.
      heartbeat_throttle: Longest seconds the SDK holds a heartbeat back; a cancel
        reaches a run at most about this late.
      sticky_timeout: Seconds a workflow task waits on this worker's own (sticky) queue
        before any worker may take it: if this worker dies, its workflows' next step
        (e.g. completing after another worker finished the activity) waits this long.
      close_timeout: Seconds closing the worker waits on the server (see
        :meth:`__aexit__`).
    """

    def __init__(
        self,
        client: Client,
        task_queue: str,
        *,
        specs: SpecSource,
        gate: ToolGate | None = None,
        ledger_dir: Path | None = None,
        max_concurrent_roots: int = DEFAULT_MAX_CONCURRENT_ROOTS,
        heartbeat_throttle: float = HEARTBEAT_THROTTLE,
        sticky_timeout: float = STICKY_TIMEOUT,
        close_timeout: float = CLOSE_TIMEOUT,
    ) -> None:
        if max_concurrent_roots < 1:
            raise ValueError(f"max_concurrent_roots must be at least 1, not {max_concurrent_roots}")
        if not close_timeout > 0:
            raise ValueError(f"close_timeout must be positive, not {close_timeout}")
        self.client = client
        self.task_queue = task_queue
        self.specs = specs
        self.gate = gate
        self.ledger_dir = ledger_dir
        self.max_concurrent_roots = max_concurrent_roots
        self.heartbeat_throttle = heartbeat_throttle
        self.sticky_timeout = sticky_timeout
        self.close_timeout = close_timeout
        self._roots = _Roots()
        self._worker: _TemporalWorker | None = None
        self._runner: asyncio.Task[None] | None = None
        self._failure: Exception | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        # When (time.monotonic) the close stops waiting on the server; read by the
        # roots' threads.
        self._close_at: float | None = None

    def _close_left(self) -> float | None:
        """Seconds left until the close stops waiting on the server; ``None`` while the
        worker is not closing. Thread-safe; not a checkpoint."""
        close_at = self._close_at
        return None if close_at is None else close_at - time.monotonic()

    def _build(self) -> _TemporalWorker:
        loop = asyncio.get_running_loop()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self.max_concurrent_roots, thread_name_prefix="subagent-root"
        )
        restrictions = SandboxRestrictions.default.with_passthrough_modules(
            "subagent", "agentcore", "ledger", "trio", "attrs", "msgspec"
        )
        throttle = timedelta(seconds=self.heartbeat_throttle)
        return _TemporalWorker(
            self.client,
            task_queue=self.task_queue,
            workflows=[SubagentWorkflow, AdmissionWorkflow],
            activities=[_RootActivity(self, loop).run_root, AdmissionCheck(self.client).check],
            activity_executor=self._executor,
            max_concurrent_activities=self.max_concurrent_roots,
            max_heartbeat_throttle_interval=throttle,
            default_heartbeat_throttle_interval=throttle,
            workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=self.sticky_timeout),
        )

    async def run(self) -> None:
        """Poll and run until cancelled (then shut down gracefully)."""
        async with self:
            await asyncio.Event().wait()

    async def __aenter__(self) -> Worker:
        """Start polling. As temporalio's worker does, a fatal error of the worker
        cancels the task that entered, and :meth:`__aexit__` raises it."""
        entered = asyncio.current_task()
        if entered is None:
            raise RuntimeError("a Worker is entered in an asyncio task")
        worker = self._worker = self._build()

        async def run() -> None:
            try:
                await worker.run()
            except Exception as exc:
                self._failure = exc
                if self._close_at is None:
                    entered.cancel()

        self._runner = asyncio.create_task(run())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: Any) -> None:
        """Shut down: the roots running are cancelled (each tree aborts and ends
        ``cancelled``). The close waits on the server at most ``close_timeout``
        seconds (:data:`CLOSE_TIMEOUT`): a root's waits on it (its end checkpoints,
        its last events) end by then, and a tree whose end the server did not
        acknowledge writes a ``worker_closed`` ledger entry saying what was not; then
        the SDK's shutdown, if it still waits on the server, is cancelled (a
        completion call the core has in flight goes on without it: see the module's
        notes). Returns once every root's thread has ended; raises the worker's fatal
        error, if it had one, when the body was cancelled by it. A checkpoint.
        """
        worker, runner = self._worker, self._runner
        self._worker = self._runner = None
        if worker is None or runner is None:
            return
        self._close_at = time.monotonic() + self.close_timeout
        stopping = asyncio.create_task(worker.shutdown())
        try:
            await asyncio.wait([runner], timeout=self.close_timeout)
        except asyncio.CancelledError:
            runner.cancel()
            raise
        finally:
            # Past the deadline the SDK waits on the server alone: stop waiting.
            stopping.cancel()
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
        while not runner.done():  # the SDK may catch a cancel at one step: cancel each
            runner.cancel()
            await asyncio.wait([runner], timeout=TICK)
        await asyncio.wait([stopping])
        await self._roots.close()
        if exc_type is asyncio.CancelledError and self._failure is not None:
            raise self._failure
