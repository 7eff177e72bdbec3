"""A paused tree's answers made durable one by one (``Pool.answer``): each answer is
given to a copy of the tree's state, stored (with checkpoints: as its root's paused
row, unless its resume was claimed), then given to the state itself and recorded in
the ledger (``answered``, with who answered). A restart between two answers loses
none: ``recover`` lists the tree with the answers stored, only its calls still
unanswered waiting, and its resume runs each approved call once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentcore import AgentPath, RunState
from agentcore._audit import record_within

from ._claims import MemoryClaims, already_resumed, resume_key

if TYPE_CHECKING:
    from ledger import Sink

    from ._store import SqliteCheckpoints

#: The kind of the ledger entry of one answer, recorded when it is given.
ANSWERED = "answered"
#: Seconds the ledger entry of an answer may take.
ANSWER_BOUND = 5.0


def _give(state: RunState, call_id: str, allow: bool, reason: str, by: str,
          path: AgentPath | None) -> None:
    if allow:
        state.approve(call_id, reason=reason or "approved", by=by, path=path)
    else:
        state.deny(call_id, reason or "denied", by=by, path=path)


def _run_at(state: RunState, path: AgentPath) -> RunState:
    # The run of ``state``'s tree at ``path`` (the state itself if none has it).
    stack = [state]
    while stack:
        node = stack.pop()
        if node.path == path:
            return node
        stack.extend(node.children)
    return state


async def commit_answer(
    store: SqliteCheckpoints | None, claims: MemoryClaims, sink: Sink | None,
    state: RunState, call_id: str, *, allow: bool, reason: str, by: str,
    path: AgentPath | None,
) -> None:
    """Answer the deferred call ``call_id`` of the paused tree ``state`` (its root's
    state, not resumed), durably: stored in ``store`` (if any) before ``state``
    changes, then recorded in ``sink`` (if any). A checkpoint.

    Raises:
      agentcore.RunStateError: the state is not paused, or has no such call (or
        several and no ``path``): nothing changes.
      AlreadyResumedError: this state was resumed already (``store``'s claims, or
        ``claims`` without a store): nothing changes.
      CheckpointError: the answer cannot be stored: nothing changes.
      agentcore.AuditError: the ledger entry cannot be recorded (the answer is kept).
    """
    asked = next((a for a in state.pending_approvals if a.call_id == call_id
                  and (path is None or a.path == path)), None)
    trial = RunState.from_json(state.to_json())
    _give(trial, call_id, allow, reason, by, path)  # raises, changing nothing
    if store is not None:
        if not await store.commit_answers(trial, resume_key(trial)):
            raise already_resumed(state)
    elif claims.claimed(trial):
        raise already_resumed(state)
    _give(state, call_id, allow, reason, by, path)
    if sink is None:
        return
    from ledger import Record

    where = asked.path if asked is not None else (path or state.path)
    run = _run_at(state, where)
    await record_within(sink, Record(
        ANSWERED, run_id=run.run_id, path=where, agent_id=run.agent,
        tool=None if asked is None else asked.tool, call_id=call_id,
        verdict="allow" if allow else "deny", reason=reason or ("approved" if allow else "denied"),
        data={"by": by},
    ), ANSWER_BOUND)
