"""Crash recovery's tree building: a root row and the rows tied to it, rebuilt as
one resumable state (children in flight nested by their calls, background children
tied to their parents' runs), deepest first with an explicit stack, never deeper than
``agentcore.limits.MAX_STATE_DEPTH``. Pure code over rows already read: no I/O, not
checkpoints (see ``subagent._durable._recovery.recover``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import agentcore
from agentcore._run._state import Phase
from agentcore.limits import MAX_STATE_DEPTH

from .._errors import UnknownAgentError
from .._reply import RESULT_PREFIX
from ._checks import _check_kept, _check_row, _delegated
from ._store import CheckpointError, CheckpointRow

if TYPE_CHECKING:
    from .._specs._spec import Spec


#: The name of the delegation tool (``SubagentTool.name``): only its calls in flight
#: are tied to the rows of the runs they started (continued, or answered when kept).
DELEGATION = "subagent"


class Pool(Protocol):
    """What the tree building uses of a ``subagent.Pool``: its specs by name."""

    @property
    def specs(self) -> Mapping[str, Spec]: ...


def _background_rows(
    row: CheckpointRow, background: dict[str, list[CheckpointRow]]
) -> list[CheckpointRow]:
    # The background children of ``row``'s run that were not done at the crash.
    calls = _delegating(row)
    return [r for r in background.get(row.run_id, []) if r.call_id not in calls]


def _delegating(row: CheckpointRow) -> set[str]:
    # The calls in flight in ``row`` that start a subagent: only their ids tie a row
    # to the call (a model may reuse an id: a tool call in flight under the id of a
    # background child's start is not that child's).
    assert row.state is not None
    return {p.call.id for p in row.state.pending
            if p.call.id in row.in_flight and p.call.name == DELEGATION}


_ByCall = dict[tuple[str | None, str | None], CheckpointRow]


def _tree(
    pool: Pool,
    root: CheckpointRow,
    by_call: _ByCall,
    background: dict[str, list[CheckpointRow]],
    top: int = 1,
) -> agentcore.RunState:
    # Deepest first, with an explicit stack: a child is recovered before its parent.
    # ``top`` is the depth of ``root`` in the tree being recovered.
    order: list[tuple[CheckpointRow, int]] = []
    stack = [(root, top)]
    while stack:
        row, depth = stack.pop()
        if depth > MAX_STATE_DEPTH:
            raise CheckpointError(
                f"checkpoint tree of run {root.run_id[:200]!r} deeper than {MAX_STATE_DEPTH}"
            )
        order.append((row, depth))
        for call_id in _delegating(row):
            child = by_call.get((row.run_id, call_id))
            if child is not None and child.status == "running":
                stack.append((child, depth + 1))
        for child in _background_rows(row, background):
            if child.status == "running":
                stack.append((child, depth + 1))
    recovered: dict[str, agentcore.RunState] = {}
    for row, depth in reversed(order):
        spec = pool.specs.get(row.name)
        if spec is None:
            raise UnknownAgentError(row.name, tuple(sorted(pool.specs)))
        assert row.state is not None
        _check_row(row, row.state, spec)
        children = {}
        answers: dict[str, agentcore.RunState] = {}
        started: dict[str, agentcore.RunState] = {}
        for call_id in _delegating(row):
            child = by_call.get((row.run_id, call_id))
            if child is None:
                continue
            if child.status == "running":
                children[call_id] = recovered[child.run_id]
            elif child.status == "paused" and child.state is not None:
                _nest_paused(pool, child.state, by_call, background, depth + 1)
                children[call_id] = child.state
            elif child.status == "ended" and child.state is not None:
                if _delegated(child):
                    answers[call_id] = _check_kept(child, background=False)  # _durable._kept
                else:
                    # A "wait": false call in flight whose subagent ended already, its
                    # result kept: answered as it was ("started"); the result is
                    # delivered as a background child's (``_nest``).
                    started[call_id] = _check_kept(child, background=True)
        repeatable = {t.name for t in spec.tools if agentcore.is_idempotent(t)}
        # A delegation in flight with no row of its own never started its subagent
        # (a subagent's start checkpoint is committed before it runs, and before a
        # "wait": false call returns): it runs again, as if the crash came before it.
        unstarted = {c for c in _delegating(row) if (row.run_id, c) not in by_call}
        agentcore.lowlevel.recover_calls(row.state, set(row.in_flight), repeatable, children,
                                row.checkpoint, unstarted)
        if answers:
            row.state.pending = [_answered(p, answers) for p in row.state.pending]
        if started:
            row.state.pending = [_started(p, started) for p in row.state.pending]
        rows = _background_rows(row, background)
        rows += [by_call[row.run_id, call_id] for call_id in started]
        background.pop(row.run_id, None)  # taken (see _nest_paused)
        _nest(pool, row.state, rows, recovered, by_call, background, depth)
        recovered[row.run_id] = row.state
    return recovered[root.run_id]


def _answered(
    p: agentcore.PendingCall, answers: dict[str, agentcore.RunState]
) -> agentcore.PendingCall:
    # A delegating call in flight at the crash whose child had finished: its kept
    # answer rather than the interrupted call's error (nothing is run again). Only the
    # call it was kept for: a delegation that waits, of that agent and that task. A
    # model may reuse a call id: another call in flight under it (a tool that writes,
    # another task) stays interrupted.
    kept = answers.get(p.call.id)
    if kept is None or p.status is not agentcore.CallStatus.done or p.call.name != DELEGATION:
        return p
    mark = kept.background
    assert mark is not None and mark.result is not None
    try:
        value = json.loads(p.call.arguments)
    except (ValueError, RecursionError):  # a stored call is hostile: any text at all
        return p
    if not (isinstance(value, dict) and value.get("wait", True) is True
            and value.get("agent") == mark.name and value.get("task") == kept.input):
        return p
    return agentcore.PendingCall(p.call, agentcore.CallStatus.done, result=mark.result)


def _started(
    p: agentcore.PendingCall, started: dict[str, agentcore.RunState]
) -> agentcore.PendingCall:
    # A "wait": false delegation in flight at the crash whose background child had
    # ended (its result kept in its row): answered as the call was, "started".
    kept = started.get(p.call.id)
    if kept is None or p.call.name != DELEGATION or kept.background is None:
        return p
    text = json.dumps({"agent": kept.background.name, "path": list(kept.path),
                       "status": "started"})
    return agentcore.PendingCall(p.call, agentcore.CallStatus.done, result=text)


#: The error result of a background child nested in a claimed resume whose own run
#: had ended at the crash: resuming it again would repeat its calls.
LOST = "it ended after its tree was resumed, before the crash; its result was lost"


def _nest(
    pool: Pool,
    state: agentcore.RunState,
    rows: list[CheckpointRow],
    recovered: dict[str, agentcore.RunState],
    by_call: _ByCall,
    background: dict[str, list[CheckpointRow]],
    depth: int,
) -> None:
    # Tie the background children's own rows ``rows`` (running or paused, tied to
    # ``state``'s run) to ``state``: each is resumed as a background child of it
    # (Pool.resume), its result delivered to it. A child ``state`` nests already (a
    # paused row committed again with them, a claimed resume) is kept, unless its own
    # row went on: running (it was resumed; ``recovered`` holds it) replaces it,
    # ended puts its kept result there (``_durable._kept``), or a lost result without one
    # (its calls are not repeated). An ended row's kept result is nested unless
    # ``state``'s conversation holds it (read before its last checkpoint).
    delegated = {p.call.id for p in state.pending
                 if p.status is agentcore.CallStatus.delegated}
    nested = {c.background.call_id: k for k, c in enumerate(state.children)
              if c.background is not None and not c.background.ended}
    delivered = {c.background.call_id for c in state.children
                 if c.background is not None and c.background.ended}
    for k in nested.values():
        kid = state.children[k]
        own = by_call.get((state.run_id, kid.background.call_id if kid.background else ""))
        if own is not None and own.status == "ended":
            state.children[k] = (_check_kept(own, background=True)
                                 if own.state is not None and not _delegated(own)
                                 else _lost(kid))
        elif own is None or own.status == "paused":
            _nest_paused(pool, kid, by_call, background, depth + 1)
    read: set[str] | None = None
    for child in rows:
        if child.call_id in delegated or child.call_id in delivered:
            continue  # a delegated call's child (nested by its call), or a kept result
        if child.status == "ended":
            if (child.call_id or "") in nested or _delegated(child):
                continue  # put in its place above, or the answer of a delegating call
            kept = _check_kept(child, background=True)
            if read is None:
                read = {m.content for m in state.messages if m.role == "user"}
            if kept.background is not None and kept.background.result not in read:
                state.children.append(kept)
            continue
        found = recovered.get(child.run_id) if child.status == "running" else child.state
        if found is None:
            continue
        at = nested.get(child.call_id or "")
        if at is not None and child.status != "running":
            continue  # nested as its row holds it
        if child.status == "paused":
            _nest_paused(pool, found, by_call, background, depth + 1)
        found.background = agentcore.BackgroundChild(child.call_id or "", child.name)
        if at is None:
            state.children.append(found)
        else:
            state.children[at] = found


def _nest_paused(
    pool: Pool,
    state: agentcore.RunState,
    by_call: _ByCall,
    background: dict[str, list[CheckpointRow]],
    depth: int,
) -> None:
    # A paused state (a paused row's, or nested in one) at ``depth``: tie to it, and
    # to the paused states nested in it, the background rows of their runs (a crash
    # before a paused run's row was committed again with its background children).
    if depth > MAX_STATE_DEPTH:
        raise CheckpointError(
            f"checkpoint tree of run {state.run_id[:200]!r} deeper than {MAX_STATE_DEPTH}"
        )
    for kid in state.children:
        if kid.background is None and kid.paused:
            _nest_paused(pool, kid, by_call, background, depth + 1)
    # Taken: a run id nested twice (edited) cannot have its rows recovered twice.
    rows = background.pop(state.run_id, [])
    recovered = {r.run_id: _tree(pool, r, by_call, background, depth + 1)
                 for r in rows if r.status == "running"}
    _nest(pool, state, rows, recovered, by_call, background, depth)


def _lost(kid: agentcore.RunState) -> agentcore.RunState:
    # The kept result, an error, of a nested background child whose run had ended.
    assert kid.background is not None
    mark = kid.background
    error = f"subagent {'/'.join(kid.path)}: {LOST}"
    body = {"agent": mark.name, "path": list(kid.path), "error": error}
    ended = agentcore.RunState.begin([], run_id=kid.run_id, agent=kid.agent, path=kid.path,
                                     input=kid.input)
    ended.phase = Phase.ended
    ended.background = agentcore.BackgroundChild(
        mark.call_id, mark.name, RESULT_PREFIX + json.dumps(body), None, error)
    return ended
