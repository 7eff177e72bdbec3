"""What a parent run is handed of a child's answer: JSON with the child's output.

A text child's output is a JSON string; a typed child's (``Spec.output_type``)
answer is its JSON value itself, so the parent model reads the structure rather than
a string of escaped JSON. A background child's answer reaches its parent's run as
a message (:func:`result_message`), with its delivery audited (:func:`audit_delivery`).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from agentcore import AgentPath, AuditError, EndReason, Message
from agentcore._audit import record_within

from ._events import EventKind

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


async def audit_delivery(
    parent: Task, call_id: str | None, agent: str, child: AgentPath,
    output: str | None, error: str | None,
) -> None:
    """Record ``result_delivered`` in ``parent``'s sink, if it has one: the result
    (``output``, or ``error``) of the background child at ``child`` (spec ``agent``,
    started by call ``call_id``) was read by ``parent``'s run. A checkpoint when
    there is a sink.

    Raises:
      AuditError: it could not be recorded (fail closed: the caller leaves the
        result unread).
    """
    sink = parent.spec.audit
    if sink is None:
        return
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
