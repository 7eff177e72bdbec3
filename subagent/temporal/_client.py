"""The caller's side: start a root workflow, follow its events (asyncio, like temporalio)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy

from .._errors import UnknownAgentError
from .._events import Event
from .._specs._file import SpecFile
from ._admission import (
    ADMISSION_WORKFLOW_NAME,
    DEFAULT_HISTORY_LIMIT,
    DEFAULT_RECLAIM_EVERY,
    DEFAULT_ROOTS_PER_RUN,
    AdmissionInput,
    AdmissionState,
    admission_id,
)
from ._errors import BadAnswer, EventDecodeError, EventsLost
from ._inputs import WORKFLOW_NAME, EventPage, RootInput, RootResult, RunOptions
from ._wire import decode_event

#: Seconds between ``events`` queries when nothing new came.
DEFAULT_POLL = 0.2
#: Seconds one ``events`` query may take.
QUERY_TIMEOUT = 10.0


def new_workflow_id(agent: str) -> str:
    """A fresh workflow id shaped like an AgentPath element: ``agent/<16 hex digits>``."""
    return f"{agent}/{uuid.uuid4().hex[:16]}"


async def start(
    client: Client,
    agent: str,
    task: str,
    *,
    task_queue: str,
    id: str | None = None,
    options: RunOptions | None = None,
    specs: SpecFile | None = None,
) -> WorkflowHandle[object, RootResult]:
    """Start a :class:`~subagent.temporal.SubagentWorkflow` for ``agent`` on ``task``.

    Args:
      id: The workflow id; by default :func:`new_workflow_id`.
      options: How it is scheduled; by default :class:`RunOptions` with, when
        ``specs`` is given, the agent's ``Spec.timeout`` as the timeout.
      specs: The specs the workers hold, to check the name and take the timeout from.

    The timeout is the workflow's execution timeout (and the activity's
    start-to-close timeout).

    Raises:
      UnknownAgentError: ``specs`` is given and has no agent ``agent``.
    """
    options = options or RunOptions()
    if specs is not None:
        by_name = {spec.name: spec for spec in specs.specs}
        if agent not in by_name:
            raise UnknownAgentError(agent, tuple(sorted(by_name)))
        if options.timeout is None and by_name[agent].timeout is not None:
            options = dataclasses.replace(options, timeout=by_name[agent].timeout)
    timeout = timedelta(seconds=options.timeout) if options.timeout else None
    if options.admission is not None:
        await ensure_admission(client, options.admission, task_queue=task_queue,
                               limit=options.admission_limit,
                               max_queue=options.admission_max_queue)
    return await client.start_workflow(
        WORKFLOW_NAME,
        RootInput(agent, task, options),
        id=id or new_workflow_id(agent),
        task_queue=task_queue,
        result_type=RootResult,
        execution_timeout=timeout,
    )


async def ensure_admission(
    client: Client,
    name: str,
    *,
    task_queue: str,
    limit: int,
    max_queue: int = 1000,
    reclaim_every: float = DEFAULT_RECLAIM_EVERY,
    history_limit: int = DEFAULT_HISTORY_LIMIT,
    roots_per_run: int = DEFAULT_ROOTS_PER_RUN,
) -> None:
    """Start the admission workflow ``name`` unless it runs already (then it keeps its
    own settings).

    Args:
      limit: Slots: roots running at once.
      max_queue: Roots waiting beyond which an ``acquire`` is refused.
      reclaim_every: Seconds between liveness checks (while any root holds a slot or
        waits); a terminated root's slot is free again at most about this late.
      history_limit, roots_per_run: It continues as new when its history reaches
        ``history_limit`` events or after ``roots_per_run`` acquires in one run
        (also whenever the server suggests it).

    Raises:
      ValueError: a setting is out of range (``limit`` or ``roots_per_run`` below 1,
        ``max_queue`` below 0, ``reclaim_every`` not above 0, ``history_limit`` below 100).
    """
    if limit < 1:
        raise ValueError(f"admission_limit must be at least 1, not {limit}")
    if max_queue < 0:
        raise ValueError(f"admission_max_queue must be at least 0, not {max_queue}")
    if not reclaim_every > 0:
        raise ValueError(f"reclaim_every must be above 0, not {reclaim_every}")
    if history_limit < 100:
        raise ValueError(f"history_limit must be at least 100, not {history_limit}")
    if roots_per_run < 1:
        raise ValueError(f"roots_per_run must be at least 1, not {roots_per_run}")
    await client.start_workflow(
        ADMISSION_WORKFLOW_NAME,
        AdmissionInput(limit, max_queue, reclaim_every, history_limit, roots_per_run),
        id=admission_id(name), task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )


async def admission_state(client: Client, name: str) -> AdmissionState:
    """The admission workflow ``name``'s limit, holders and waiting roots (a query).

    Raises:
      BadAnswer: the query returned something else.
    """
    handle = client.get_workflow_handle(admission_id(name))
    state = await handle.query("state", result_type=AdmissionState,
                               rpc_timeout=timedelta(seconds=QUERY_TIMEOUT))
    if not isinstance(state, AdmissionState):
        raise BadAnswer("the admission state query did not return an admission state")
    return state


def _check_page(page: object) -> EventPage:
    if not isinstance(page, EventPage):
        raise EventDecodeError("the events query did not return an event page")
    counts = (page.first, page.total)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        raise EventDecodeError("the events query returned invalid offsets")
    if not isinstance(page.events, list) or not all(isinstance(e, str) for e in page.events):
        raise EventDecodeError("the events query returned events that are not text")
    if page.first + len(page.events) > page.total:
        raise EventDecodeError("the events query returned more events than it counted")
    return page


async def events(
    client: Client,
    workflow_id: str,
    *,
    offset: int = 0,
    poll: float = DEFAULT_POLL,
) -> AsyncIterator[Event]:
    """The root workflow's events from ``offset`` on, live, until its activity ended.

    To resume after a break, pass the number of events already received as ``offset``.
    The workflow keeps only the last ``RunOptions.keep_events``; events are pulled by
    query (no backpressure reaches the run: it stops at the workflow boundary).

    Raises:
      EventsLost: events from ``offset`` on are no longer kept (``first`` says where
        the kept ones start).
      EventDecodeError: the workflow answered with something that is not an event.
      ValueError: ``offset`` is not a whole number from 0, or ``poll`` not a positive
        number of seconds (raised at the first iteration).
    """
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a whole number from 0, not {offset!r}")
    if isinstance(poll, bool) or not isinstance(poll, int | float) or not 0 < poll < math.inf:
        raise ValueError(f"poll must be a positive number of seconds, not {poll!r}")
    handle = client.get_workflow_handle(workflow_id)
    while True:
        page = _check_page(await handle.query(
            "events", offset, result_type=EventPage,
            rpc_timeout=timedelta(seconds=QUERY_TIMEOUT),
        ))
        if page.first > offset:
            raise EventsLost(offset, page.first)
        for text in page.events:
            yield decode_event(text)
            offset += 1
        if page.done and offset >= page.total:
            return
        if not page.events:
            await asyncio.sleep(poll)
