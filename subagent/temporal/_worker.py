"""``subagent.temporal.Worker``: a Temporal worker hosting the specs and the root activity.

Each root activity runs as a **sync activity on its own thread** with its own
``trio.run`` (a fresh pool per attempt). Why not trio guest mode on the worker's
asyncio loop: agent tools are user code, and one that blocks its event loop would
then stall the worker's polling, heartbeats and every other run on it; a thread per
root keeps a run's loop its own, bounds the roots a worker runs by its executor, and
keeps trio and asyncio apart (the only crossings are the event signal and the
recorded heartbeat, scheduled on the worker's loop, and ``activity.heartbeat``,
which is thread-safe).

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
from collections.abc import Awaitable, Callable, Coroutine
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
from ._tree import SEND_TIMEOUT, Cancelled, Link, run_tree
from ._workflow import SubagentWorkflow

#: Roots one worker runs at once, unless told otherwise.
DEFAULT_MAX_CONCURRENT_ROOTS = 16
#: Longest time between heartbeats the SDK holds back (also bounds how late a cancel is seen).
HEARTBEAT_THROTTLE = 1.0

#: Seconds one recorded heartbeat (a checkpoint of the tree) may take on the wire.
RECORD_TIMEOUT = SEND_TIMEOUT

#: Seconds a workflow task waits on a worker's sticky queue (the SDK's default).
STICKY_TIMEOUT = 10.0

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
        link = Link(
            send=self._send(job.workflow_id),
            heartbeat=lambda payload: activity.heartbeat(payload),
            cancelled=activity.is_cancelled,
            attempt=info.attempt,
            details=tuple(info.heartbeat_details),
            controls=self._controls(job.workflow_id),
            record=self._record(info.task_token),
        )
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
    ) -> None:
        if max_concurrent_roots < 1:
            raise ValueError(f"max_concurrent_roots must be at least 1, not {max_concurrent_roots}")
        self.client = client
        self.task_queue = task_queue
        self.specs = specs
        self.gate = gate
        self.ledger_dir = ledger_dir
        self.max_concurrent_roots = max_concurrent_roots
        self.heartbeat_throttle = heartbeat_throttle
        self.sticky_timeout = sticky_timeout
        self._worker: _TemporalWorker | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

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
        self._worker = self._build()
        await self._worker.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        worker, self._worker = self._worker, None
        try:
            if worker is not None:
                await worker.__aexit__(*exc)
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=False)
