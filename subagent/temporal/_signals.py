"""The caller's side of a running or paused root workflow: its pending approvals and
the answers to them, the status of its tasks, and the graceful controls (asyncio).

``approve`` and ``deny`` check the answer against the ``pending`` query before they
signal, so a wrong call id fails here with a clear error (the workflow itself
ignores an answer that names no pending call).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from temporalio.client import Client

from ._approvals import MAX_STEER_CHARS, MAX_TASKS, answer_problem
from ._client import QUERY_TIMEOUT
from ._errors import BadAnswer, NotPaused, UnknownCall
from ._inputs import Answer, ApprovalRequest, PendingAnswers


def _rpc() -> timedelta:
    return timedelta(seconds=QUERY_TIMEOUT)


def _check_pending(value: object) -> PendingAnswers:
    if not isinstance(value, PendingAnswers) or not isinstance(value.calls, list):
        raise BadAnswer("the pending query did not return pending calls")
    for call in value.calls:
        if not isinstance(call, ApprovalRequest) or not all(
                isinstance(x, str) for x in (call.call_id, call.tool, call.arguments, call.reason,
                                             *call.path)):
            raise BadAnswer("the pending query returned a call that is not one")
    return value


async def pending(client: Client, workflow_id: str) -> PendingAnswers:
    """The paused run's deferred calls and the answers received so far
    (``paused`` is ``False`` while the run is not waiting for answers).

    Raises:
      BadAnswer: the workflow answered with something that is not a ``PendingAnswers``.
    """
    handle = client.get_workflow_handle(workflow_id)
    return _check_pending(
        await handle.query("pending", result_type=PendingAnswers, rpc_timeout=_rpc())
    )


async def tasks(client: Client, workflow_id: str) -> dict[str, str]:
    """The status of every task of the workflow's tree (task path -> ``TaskStatus``
    value), as its activity last reported it (the paused tree while it waits).

    Raises:
      BadAnswer: the answer is not a mapping of text to text.
    """
    handle = client.get_workflow_handle(workflow_id)
    found = await handle.query("tasks", result_type=dict[str, str], rpc_timeout=_rpc())
    if not isinstance(found, dict) or len(found) > MAX_TASKS or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
        raise BadAnswer("the tasks query did not return task statuses")
    return found


async def _answer(client: Client, workflow_id: str, signal: str, answer: Answer) -> None:
    problem = answer_problem(answer)
    if problem is not None:
        raise BadAnswer(f"cannot send this answer: {problem}")
    now = await pending(client, workflow_id)
    if not now.paused:
        raise NotPaused(f"workflow {workflow_id[:200]!r} is not paused for approval")
    path = answer.path
    found = [c for c in now.calls
             if c.call_id == answer.call_id and (path is None or c.path == list(path))]
    if len(found) != 1:
        ids = ", ".join(repr(c.call_id) for c in now.calls[:10]) or "none"
        if found:
            raise UnknownCall(f"{len(found)} deferred calls have id {answer.call_id[:200]!r}: "
                              "give the path of the run that made it")
        raise UnknownCall(f"no deferred call with id {answer.call_id[:200]!r}; "
                          f"waiting for an answer: {ids}")
    await client.get_workflow_handle(workflow_id).signal(signal, answer, rpc_timeout=_rpc())


async def approve(
    client: Client, workflow_id: str, call_id: str, *, reason: str = "approved", by: str = "",
    path: Sequence[str] | None = None,
) -> None:
    """Approve the paused workflow's deferred call ``call_id`` (at ``path``, the
    AgentPath of the run that made it, when ids repeat). Once every deferred call has
    an answer the run resumes, on any worker. ``reason`` and ``by`` go to the ledger.

    Raises:
      NotPaused: the workflow is not waiting for answers.
      UnknownCall: no deferred call (or several) has that id.
      BadAnswer: ``reason`` (4096 characters), ``by`` (256) or ``path`` is too long.
    """
    answer = Answer(call_id, True, reason, by, None if path is None else list(path))
    await _answer(client, workflow_id, "approve", answer)


async def deny(
    client: Client, workflow_id: str, call_id: str, *, reason: str = "denied", by: str = "",
    path: Sequence[str] | None = None,
) -> None:
    """Deny the paused workflow's deferred call ``call_id``: on resume it gets the
    error result ``denied: <reason>``. Arguments and errors as :func:`approve`."""
    answer = Answer(call_id, False, reason, by, None if path is None else list(path))
    await _answer(client, workflow_id, "deny", answer)


async def interrupt(client: Client, workflow_id: str) -> None:
    """Ask the workflow's root to stop gracefully (``Task.interrupt``: one more model
    call without tools to summarise). The running activity applies it within about
    half a second; sent while paused, it applies when the run resumes."""
    await client.get_workflow_handle(workflow_id).signal("interrupt", rpc_timeout=_rpc())


async def steer(client: Client, workflow_id: str, text: str) -> None:
    """Add ``text`` as a user message to the root's conversation (``Task.steer``),
    read at the top of its next turn.

    Raises:
      BadAnswer: ``text`` is longer than :data:`MAX_STEER_CHARS` characters.
    """
    if len(text) > MAX_STEER_CHARS:
        raise BadAnswer(f"a steering text may have at most {MAX_STEER_CHARS} characters")
    await client.get_workflow_handle(workflow_id).signal("steer", text, rpc_timeout=_rpc())


async def controls_applied(client: Client, workflow_id: str) -> int:
    """How many of the workflow's controls (interrupts and steering texts, in the
    order sent) its activities have applied to the root so far.

    Raises:
      BadAnswer: the answer is not a count.
    """
    handle = client.get_workflow_handle(workflow_id)
    count = await handle.query("controls_applied", result_type=int, rpc_timeout=_rpc())
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise BadAnswer("the controls_applied query did not return a count")
    return count
