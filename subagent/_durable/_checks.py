"""Crash recovery's checks of rows read back from a checkpoint store (outside input):
one row per run id, and a row's columns outside its state's digest agree with the
state. Pure code, not checkpoints (see ``subagent._durable._recovery.recover``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import agentcore

from .._reply import RESULT_PREFIX
from ._store import CheckpointError, CheckpointRow, UnreadRow

if TYPE_CHECKING:
    from .._specs._spec import Spec


def _check_unique(rows: Sequence[CheckpointRow | UnreadRow]) -> None:
    # One row per run id (the table's key; a hand-made table may lack it): a run id
    # stored twice makes the parent links a graph whose paths grow as 2**depth.
    seen: set[str] = set()
    for row in rows:
        if row.run_id in seen:
            raise CheckpointError(f"the checkpoints hold run {row.run_id[:200]!r} twice "
                                  "(edited or damaged); refusing to recover them")
        seen.add(row.run_id)


def _check_row(row: CheckpointRow, state: agentcore.RunState, spec: Spec) -> None:
    # The row's name and in-flight ids are outside the state's digest: they must agree
    # with it, else an edit there repeats a call the never-repeat rule holds back.
    where = f"checkpoint of run {row.run_id[:200]!r}"
    if state.agent != spec.agent_id:
        raise CheckpointError(
            f"{where} names spec {row.name[:200]!r}, but its state is a run of agent "
            f"{state.agent[:200]!r}; refusing to recover it"
        )
    if row.status != "running":
        return
    claimed = row.claimed and row.parent is None
    if not claimed:
        # A turn, call or start snapshot (agentcore._run._checkpoint.snapshot) holds only
        # calls without a result, ``waiting``, and no nested run: an answered call
        # there (re-digested by hand) would run without its gate.
        for p in state.pending:
            if p.status is not agentcore.CallStatus.waiting:
                raise CheckpointError(
                    f"{where} holds call {p.call.id[:200]!r} as {p.status.value}, which "
                    "a running checkpoint never does (edited or damaged); refusing to "
                    "recover it"
                )
        if state.children:
            raise CheckpointError(
                f"{where} holds nested runs, which a running checkpoint never does "
                "(edited or damaged); refusing to recover it"
            )
    elif row.in_flight and any(
        p.status is not agentcore.CallStatus.waiting for p in state.pending
    ):
        # A claimed resume's answered state is stored with nothing in flight.
        raise CheckpointError(
            f"{where} holds answered calls and calls in flight (edited or damaged); "
            "refusing to recover it"
        )
    if claimed and row.claimed_state and not row.in_flight:
        # The claim's own row (``SqliteCheckpoints.claim``: the paused state resumed,
        # nothing in flight): a run pauses once the calls it started have ended, so its
        # calls without a result never started (a pause asked for while their turn
        # ran, by a background child that paused). A later checkpoint of the resumed
        # run holds another state, whose in-flight ids are checked below.
        return
    waiting = [p.call.id for p in state.pending if p.status is agentcore.CallStatus.waiting]
    if waiting and len(waiting) == len(state.pending) and waiting[0] not in row.in_flight:
        # A ``call`` checkpoint is taken just before its call, the first without a result.
        raise CheckpointError(
            f"{where} does not match its state: call {waiting[0][:200]!r} has no result "
            "and is not among its in-flight calls (edited or damaged); refusing to recover it"
        )


def _delegated(row: CheckpointRow) -> bool:
    # Whether an ended row's kept result is a delegating call's answer (``wait: true``;
    # a background child's is the message that delivers it, RESULT_PREFIX first).
    holder = row.state
    kid = holder.children[0] if holder is not None and len(holder.children) == 1 else None
    mark = kid.background if kid is not None else None
    return mark is not None and mark.result is not None and not mark.result.startswith(
        RESULT_PREFIX)


def _check_kept(row: CheckpointRow, *, background: bool) -> agentcore.RunState:
    # The kept result an ended row's state holds (``_durable._kept``: the one child of its
    # row's state), a background child's (``background``) or a delegating call's
    # answer: it is handed to the recovered parent, so it must be what write_kept
    # stores, for this row's call.
    holder = row.state
    assert holder is not None
    state = holder.children[0] if len(holder.children) == 1 else holder
    mark = state.background
    if (
        state is holder or state.run_id != row.run_id or mark is None or mark.result is None
        or mark.call_id != (row.call_id or "") or mark.name != row.name
        or mark.result.startswith(RESULT_PREFIX) is not background
        or (not background and mark.output is None)
        or state.children or state.pending
    ):
        raise CheckpointError(
            f"checkpoint of run {row.run_id[:200]!r} holds a kept result that is not its "
            "call's (edited or damaged); refusing to recover it"
        )
    return state
