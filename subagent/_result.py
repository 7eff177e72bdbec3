"""Result (what a finished task produced) and the status a run's end gives a task."""

from __future__ import annotations

from typing import Any

import attrs

from agentcore import AgentPath, EndReason, Message, RunSummary, Usage

from ._core._core import TaskStatus

_SUCCESS = frozenset({EndReason.stop, EndReason.max_turns, EndReason.interrupted})


@attrs.frozen
class Result:
    """What a finished task produced.

    Attributes:
      path: The task's AgentPath.
      output: The final assistant text (the JSON of a typed run's answer).
      summary: The run's :class:`agentcore.RunSummary` (its usage is the run's own).
      tree_usage: The usage of this task and of every descendant that ended before
        it resolved (waited-for, delivered, orphaned or cancelled children alike); a
        critical child still running then is not in it (its ``task_orphaned``
        event carries its own tree usage).
      structured: The decoded answer of a typed run (``Spec.output_type``; then
        ``output`` is its JSON); None for a text run.
      messages: The run's conversation at its end, without its system prompt (keyword
        only): the history it started from, its task text, then every message the
        run added (steering, assistant answers, tool results), as the run kept it
        (``Spec.max_messages``, 50 by default, and ``history_limit`` drop the oldest).
        Pass it as ``Pool.submit(..., history=result.messages)`` to go on with the
        conversation. Not compared by ``==`` (a Result equals another of the same
        path, output, summary, tree usage, structured value and follow-ups).
      follow_ups: Texts for the caller to run next, in the order received (keyword
        only): those sent with :meth:`Task.follow_up`, then steering the run did not
        read before it ended (see :attr:`agentcore.RunResult.follow_ups`). The pool
        does not run them.
    """

    path: AgentPath
    output: str
    summary: RunSummary
    tree_usage: Usage = Usage()
    structured: Any = None
    messages: tuple[Message, ...] = attrs.field(default=(), kw_only=True, eq=False)
    follow_ups: tuple[str, ...] = attrs.field(default=(), kw_only=True)


def end_status(reason: EndReason) -> TaskStatus:
    """The status of a task whose run ended for ``reason``."""
    if reason in _SUCCESS:
        return TaskStatus.finished
    if reason is EndReason.timeout:
        return TaskStatus.timed_out
    if reason is EndReason.error:
        return TaskStatus.failed
    if reason is EndReason.paused:
        return TaskStatus.paused
    return TaskStatus.cancelled
