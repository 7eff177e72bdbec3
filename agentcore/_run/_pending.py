"""The tool calls a paused run left to finish: :class:`PendingCall` and the human's
view of those waiting for an answer, :class:`PendingApproval`.

When a gate defers a call (``GateDecision.defer``) the run stops at its next safe
point; the calls of that turn that have no result message yet are kept in order in
its ``RunState``, each with what is known about it. On resume they are finished in
the same order, so the conversation is the one the run would have had without the
pause. Values only; no I/O.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import attrs

from .._messages import AgentPath, ToolCall


class CallStatus(enum.StrEnum):
    """Where one of a paused turn's calls is."""

    done = "done"
    """It ran (or was refused) before the pause; its result is kept."""
    deferred = "deferred"
    """Its gate deferred it: it waits for a human's answer."""
    approved = "approved"
    """A human approved it: it runs on resume."""
    denied = "denied"
    """A human denied it: it gets an error result on resume."""
    waiting = "waiting"
    """It had not started when the run paused: on resume it is gated and run as usual."""
    delegated = "delegated"
    """Its tool started a run that paused (``CallPaused``): that run's state is the
    next of ``RunState.children``; on resume the tool continues it."""


@attrs.frozen(slots=True)
class PendingCall:
    """One call of the turn a run paused in, not yet answered in the conversation.

    Attributes:
      call: The call (as the ``before_tool`` hooks left it, for a deferred one).
      status: Where it is.
      reason: Why the gate deferred it, then the human's reason once answered.
      by: Who answered (as given to ``approve`` / ``deny``).
      result: Its result text (``done`` only).
      is_error: Whether that result is an error (``done`` only).
      denied: Whether that result is a denial (``done`` only).
      schema: For a call its gate deferred, :func:`schema_digest` of its tool's
        name and JSON schema then: resuming an approved call against a tool of the
        same name whose schema differs is refused (``ResumeError``). Empty for
        other calls (and in states written before it existed: not checked).
    """

    call: ToolCall
    status: CallStatus
    reason: str = ""
    by: str = ""
    result: str = ""
    is_error: bool = False
    denied: bool = False
    schema: str = attrs.field(default="", eq=False)
    """(Not compared: two pending calls are equal whatever digest they carry.)"""


def schema_digest(name: str, parameters: Mapping[str, Any]) -> str:
    """``sha256:`` and the hex SHA-256 of a tool's name and JSON schema (canonical
    JSON: sorted keys, no spaces). Not a checkpoint."""
    text = json.dumps([name, parameters], sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, default=repr)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@attrs.frozen(slots=True)
class PendingApproval:
    """A deferred tool call waiting for a human (``RunState.pending_approvals``).

    Attributes:
      path: The AgentPath of the run that made the call.
      call_id: The call's id (what ``approve`` and ``deny`` take).
      tool: The tool's name.
      arguments: The call's JSON argument text, as the model wrote it (hostile:
        escape it before showing it on a terminal).
      reason: Why the gate deferred it.
    """

    path: AgentPath
    call_id: str
    tool: str
    arguments: str
    reason: str


@attrs.frozen(slots=True)
class BackgroundChild:
    """The mark of a child state that is a *background* child of its parent run (a
    subagent started with ``wait: false``) whose result the parent had not read when
    the tree paused: ``RunState.background`` of one of ``RunState.children``, after
    the states of the delegated calls. Values only.

    A background child that had not ended when its tree paused was paused too (at
    its next safe point, like the rest of the tree): its state is that paused run's,
    and ``result`` is None. One that had ended carries the message that delivers its
    result (``result``, with exactly one of ``output`` and ``error``); its state then
    holds only its path, agent, input and summary. On ``subagent.Pool.resume`` the
    first kind is resumed as a background child of the resumed parent, and the
    second kind's message is delivered to it once, before its next model call.

    Attributes:
      call_id: The id of the parent's tool call that started it.
      name: The name of the spec it runs in the pool (its ``agent`` is the agent id).
      result: The content of the user message that delivers its result (ended only).
      output: Its output (ended and finished only).
      error: Its error text (ended otherwise only).
    """

    call_id: str
    name: str
    result: str | None = None
    output: str | None = None
    error: str | None = None

    @property
    def ended(self) -> bool:
        """Whether the child had ended (its result waits to be delivered)."""
        return self.result is not None
