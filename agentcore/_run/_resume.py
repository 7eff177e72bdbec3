"""Resuming a paused run: whether an Agent can, the answers' audit entries, and
finishing the paused turn.

On resume, :func:`finish_pending` appends what the paused turn already knew and
runs the rest in the same call order, so the conversation is the one an
in-process approval would have given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from .._errors import ResumeError
from .._messages import Message
from .._tools._gate import GateDecision
from .._tools._tools import ToolOutcome
from ._checkpoint import INTERRUPTED
from ._pause import Deferred, pending_of
from ._pending import CallStatus, PendingCall, schema_digest
from ._state import RunState
from ._toolcall import answer_call, continue_call, result_message, run_tools

if TYPE_CHECKING:
    from ledger._entry import Scalar

    from ._port import RunPort


class Resumer(Protocol):
    """What :func:`check_resumable` reads of an Agent."""

    @property
    def agent_id(self) -> str: ...
    @property
    def tools_by_name(self) -> Mapping[str, object]: ...


_NEEDS_TOOL = (CallStatus.approved, CallStatus.delegated)


def check_resumable(agent: Resumer, state: RunState) -> None:
    """Raise :class:`ResumeError` unless ``agent`` can resume ``state``. Not a checkpoint."""
    if not state.paused:
        ended = state.summary.end_reason if state.summary is not None else state.phase.value
        raise ResumeError(
            f"this RunState is not paused ({ended}): only a paused run can be resumed"
        )
    if state.agent != agent.agent_id:
        raise ResumeError(
            f"this RunState is a run of agent {state.agent[:200]!r}, "
            f"not of this Agent ({agent.agent_id!r})"
        )
    kept = [c for c in state.children if c.background is not None]
    if kept and not getattr(agent, "takes_background", False):
        # Only a pool can start them again and deliver their results.
        raise ResumeError(
            f"this RunState has {len(kept)} background subagent(s) not yet delivered: "
            "resume it with subagent's Pool.resume"
        )
    for waiting in state.pending_approvals:
        raise ResumeError(
            f"call {waiting.call_id[:200]!r} (tool {waiting.tool[:200]!r}) has no answer "
            "yet: approve or deny it first"
        )
    for p in state.pending:
        if p.status in _NEEDS_TOOL and p.call.name not in agent.tools_by_name:
            names = ", ".join(sorted(agent.tools_by_name)) or "none"
            raise ResumeError(
                f"tool {p.call.name[:200]!r} of {p.status} call {p.call.id[:200]!r} is not "
                f"among this Agent's tools ({names})"
            )
        if p.status is CallStatus.approved and p.schema:
            tool = agent.tools_by_name[p.call.name]
            now = schema_digest(p.call.name, getattr(tool, "parameters", {}))
            if now != p.schema:
                raise ResumeError(
                    f"tool {p.call.name[:200]!r} of approved call {p.call.id[:200]!r} is not "
                    "the tool that was approved: its JSON schema changed since the pause "
                    "(refused; ask for a new approval)"
                )
        if p.status is CallStatus.delegated and not getattr(
            agent.tools_by_name[p.call.name], "resumes_paused_calls", False
        ):
            # A delegated call is continued without its gate (it passed it before the
            # pause): only a tool that continues a paused run may take one, so that a
            # stored state cannot run any other tool ungated.
            raise ResumeError(
                f"call {p.call.id[:200]!r} is marked delegated, but its tool "
                f"{p.call.name[:200]!r} does not continue paused calls "
                "(resumes_paused_calls): refused"
            )


async def audit_answers(run: RunPort, pending: Sequence[PendingCall]) -> None:
    """Record the human's answers, then ``run_resumed``, on the run's audit chain.

    A checkpoint when there is a sink. Raises ``AuditError`` (the run must not go on).
    """
    answered = 0
    for p in pending:
        if p.status in (CallStatus.approved, CallStatus.denied):
            answered += 1
            await run.audit(
                "approval",
                tool=p.call.name,
                call_id=p.call.id,
                verdict="allow" if p.status is CallStatus.approved else "deny",
                reason=p.reason,
                data={"by": p.by},
            )
    data: dict[str, Scalar] = {"answers": answered, "pending": len(pending)}
    state = run.state
    if state.checkpoint:
        # Recovered after a crash: name the checkpoint, and the calls not repeated.
        data["checkpoint"] = state.checkpoint
        data["interrupted"] = " ".join(p.call.id for p in pending if p.result == INTERRUPTED
                                       and p.status is CallStatus.done)
        state.checkpoint = ""
    await run.audit("run_resumed", data=data)


async def finish_pending(
    run: RunPort, pending: Sequence[PendingCall], children: Sequence[RunState]
) -> None:
    """Finish the paused turn's calls in call order. A checkpoint.

    Kept results are appended; an approved call runs (its ``gate_decision`` is the
    human's), a denied one gets ``denied: <reason>``; a delegated call's tool
    continues the run it left paused (the next of ``children``); the calls that had
    not started go through the tool phase as usual. Any of them may pause the run
    again: the calls not finished stay pending, with their answers.
    """
    # The background children's states are the pool's (it took them before the run).
    kids = [c for c in children if c.background is None]
    for k, p in enumerate(pending):
        if p.status is CallStatus.waiting:
            await run_tools(run, [q.call for q in pending[k:]])
            return
        if p.status is CallStatus.done:
            outcome = ToolOutcome(p.result, p.is_error, p.denied)
        elif p.status is CallStatus.delegated:
            outcome = await continue_call(run, p.call, kids.pop(0))
        else:
            allowed = p.status is CallStatus.approved
            outcome = await answer_call(run, p.call, GateDecision(allowed, p.reason))
        if isinstance(outcome, Deferred):
            # Paused again (in a subagent): this call waits again, the rest as they were.
            again, more = pending_of([p.call], [outcome])
            run.pause_calls([*again, *pending[k + 1:]], [*more, *kids])
            return
        run.add_message(result_message(p.call, outcome))


def last_answer(messages: Sequence[Message]) -> str:
    """The text of the last assistant message (what ``max_turns`` returns)."""
    for message in reversed(messages):
        if message.role == "assistant":
            return message.content
    return ""
