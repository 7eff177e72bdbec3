"""The admission workflow's liveness check: an activity that finds closed roots.

A root that is terminated, times out at its execution timeout, or is reset away
runs no ``finally`` and never releases its slot. The admission workflow therefore
asks, every ``reclaim_every`` seconds while any root holds a slot or waits, this
activity (registered by :class:`~subagent.temporal.Worker`) which of a batch of at
most :data:`MAX_CHECK` roots are closed: it describes each root's workflow id (its
current run) with the worker's client. A root is closed when its workflow id is not
found, its current run is not running, or its current run belongs to another run
chain (a new workflow reusing the id). A describe that fails otherwise (timeout,
server busy) says nothing: that root is kept and checked again next time.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from ._admission_books import MAX_ID

#: The name the liveness check activity is registered under.
CHECK_ACTIVITY = "subagent_admission_check"
#: Roots one liveness check describes at most.
MAX_CHECK = 100
#: Describe calls one check runs at once.
CHECK_CONCURRENCY = 10
#: Seconds one describe call may take.
DESCRIBE_TIMEOUT = 5.0


@dataclass(frozen=True)
class CheckInput:
    """Roots to check: ``(workflow id, first run id of the chain)`` pairs."""

    roots: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class CheckResult:
    """The roots of the input found closed."""

    closed: list[tuple[str, str]] = field(default_factory=list)


class AdmissionCheck:
    """The liveness check activity, bound to a worker's client."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def closed(self, workflow_id: str, chain: str) -> bool:
        """Whether the root ``(workflow_id, chain)`` is closed (``False`` when unknown)."""
        handle = self.client.get_workflow_handle(workflow_id)
        try:
            description = await handle.describe(
                rpc_timeout=timedelta(seconds=DESCRIBE_TIMEOUT))
        except RPCError as exc:
            return exc.status == RPCStatusCode.NOT_FOUND
        if description.status != WorkflowExecutionStatus.RUNNING:
            return True
        first = description.raw_description.workflow_execution_info.first_run_id
        return bool(chain and first and first != chain)

    @activity.defn(name=CHECK_ACTIVITY)
    async def check(self, roots: CheckInput) -> CheckResult:
        """The roots of ``roots`` (at most :data:`MAX_CHECK`) whose workflow is closed."""
        wanted = [
            (w, r) for w, r in list(roots.roots)[:MAX_CHECK]
            if isinstance(w, str) and isinstance(r, str) and 0 < len(w) <= MAX_ID
            and len(r) <= MAX_ID
        ]
        limit = asyncio.Semaphore(CHECK_CONCURRENCY)

        async def one(key: tuple[str, str]) -> bool:
            async with limit:
                return await self.closed(*key)

        found = await asyncio.gather(*(one(key) for key in wanted))
        return CheckResult([key for key, gone in zip(wanted, found, strict=True) if gone])
