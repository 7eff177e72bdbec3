"""What a parent run is handed of a child's answer: JSON with the child's output.

A text child's output is a JSON string; a typed child's (``Spec.output_type``)
answer is its JSON value itself, so the parent model reads the structure rather than
a string of escaped JSON. A background child's answer reaches its parent's run as
a message (:func:`result_message`); once its run reads it, the delivery is audited
and announced (:func:`report_delivery`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentcore import AgentPath, AuditError, EndReason, Message
from agentcore._audit import record_within

from ._events import Event, EventKind

if TYPE_CHECKING:
    from ledger import Sink

    from ._pool._task import Task


def with_output(body: dict[str, object], task: Task, output: str) -> str:
    """``body`` as JSON text with ``"output"`` added last: ``output`` as a JSON string,
    or, for a typed task that ended with an accepted answer, as the JSON value it is.
    Pure.

    A typed run ends ``stop`` only by an accepted ``final_result``, and its output is
    then the answer's JSON as msgspec encoded it: it is inserted as it is.
    """
    summary = task._summary
    typed = (
        task.spec.output_type is not None
        and summary is not None
        and summary.end_reason is EndReason.stop
    )
    if not typed:
        body["output"] = output
        return json.dumps(body)
    head = json.dumps(body)
    return f"{head[:-1]}, \"output\": {output}}}" if body else f"{{\"output\": {output}}}"


# ------------------------------------------------------------------------------
# A background child's result as its parent receives it: the ``[subagent result]``
# message, and the audit entries of its delivery (shared by ``_pool._ending`` and
# ``_delegation._paused``). Values and one bounded audit call; no state.


#: Starts the content of the message that delivers a background result. The rest is
#: JSON: ``{"agent", "path", "output"}``, or ``"error"`` instead of ``"output"``.
RESULT_PREFIX = "[subagent result] "


def outcome(task: Task) -> tuple[str | None, str | None]:
    """The output of an ended task, or the error ``wait()`` raises for it: one is None."""
    failure = task._failure()
    if failure is None:
        return task._output, None
    return None, str(failure)


def result_message(task: Task) -> Message:
    """The user message that hands a background task's result to its parent run.

    Its role is ``user`` (the only role a model accepts outside a tool answer), and the
    ``[subagent result]`` prefix tells the model it is information, not a request.
    """
    output, error = outcome(task)
    body: dict[str, object] = {"agent": task.name, "path": list(task.path)}
    if error is None:
        assert output is not None
        return Message("user", RESULT_PREFIX + with_output(body, task, output))
    body["error"] = error
    return Message("user", RESULT_PREFIX + json.dumps(body))


async def audit_entry(
    sink: Sink, kind: EventKind, bound: float, **fields: Any
) -> AuditError | None:
    # One entry of background delegation, bounded by ``bound``: a sink that fails or
    # does not answer in time is returned as an AuditError naming the entry's kind.
    from ledger import Record

    try:
        await record_within(sink, Record(str(kind), **fields), bound)
    except AuditError as failure:
        return failure
    return None


async def report_delivery(
    parent: Task, call_id: str | None, agent: str, child: AgentPath,
    output: str | None, error: str | None, read: Callable[[], object],
) -> None:
    """``parent``'s run read the result (``output``, or ``error``) of the background
    child at ``child`` (spec ``agent``, started by call ``call_id``): record
    ``result_delivered`` in ``parent``'s sink, if it has one, then mark it read
    (``read()``), then send the ``result_delivered`` event to ``parent``'s stream. A
    checkpoint when there is a sink or a stream.

    Raises:
      AuditError: the entry could not be recorded (fail closed: the result stays
        unread, and the parent's end orphans it).
    """
    sink = parent.spec.audit
    if sink is not None:
        failure = await audit_entry(
            sink,
            EventKind.result_delivered,
            math.inf,
            run_id="/".join(parent.path),
            path=parent.path,
            agent_id=parent.spec.agent_id,
            call_id=call_id,
            result=output,
            error=error,
            data={"agent": agent, "child": "/".join(child)},
        )
        if failure is not None:
            raise failure
    read()
    if parent.events is not None:
        await parent.events.send(Event(parent.path, EventKind.result_delivered, None,
                                       parent.call_id, error=error, child=child,
                                       output=output))
