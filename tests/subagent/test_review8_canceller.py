"""An attacker's review of ``subagent._pool._scopes.Canceller`` against trio's own
``CancelScope.cancel()``: over random trees of scopes (nested in a task, shielded,
with deadlines in trio's heap, cancelled already, unentered, around a nursery whose
tasks open scopes of their own), a batch of cancels in random order (some scopes
twice) leaves every scope and status as one ``cancel()`` per scope does: the same
scopes cancelled and effectively cancelled, the same cancel reasons, the same
deadlines left in trio's heap, the same tasks woken, each protected from
KeyboardInterrupt while its abort function runs, and then the same ``Cancelled``
seen and ``cancelled_caught`` when the tasks unwind."""

from __future__ import annotations

import contextlib
import math
import re
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from subagent._pool import _scopes

_HEX = re.compile(r"0x[0-9a-f]+")

# A scope: (shield, deadline in seconds or None, cancelled before the batch).
ScopeSpec = tuple[bool, float | None, bool]
# A task: its scopes, outermost first, and whether it opens a nursery inside them
# whose two tasks each enter one more scope (a status with children).
TaskSpec = tuple[list[ScopeSpec], bool]

scope_st = st.tuples(
    st.booleans(), st.none() | st.sampled_from([0.5, 5.0]), st.integers(0, 4).map(lambda n: n == 0)
)
task_st = st.tuples(st.lists(scope_st, min_size=1, max_size=3), st.booleans())


def _reason(scope: trio.CancelScope) -> object:
    reason = scope._cancel_reason
    if reason is None:
        return None
    return (reason.source, _HEX.sub("0x?", str(reason.source_task)), reason.reason)


async def _play(tasks: list[TaskSpec], picks: list[int], public: bool) -> dict[str, Any]:
    scopes: list[trio.CancelScope] = []
    chains: list[trio.CancelScope] = []  # the tasks' own scopes (not the leaves')
    precancel: dict[int, bool] = {}
    names: dict[int, str] = {}
    aborted: list[tuple[str, bool]] = []
    seen: list[tuple[str, str]] = []
    now = trio.current_time()

    def make(spec: ScopeSpec, name: str) -> trio.CancelScope:
        shield, deadline, _ = spec
        scope = trio.CancelScope(shield=shield)
        if deadline is not None:
            scope.deadline = now + deadline
        names[id(scope)] = name
        scopes.append(scope)
        return scope

    async def park(name: str) -> None:
        def abort(_: object) -> trio.lowlevel.Abort:
            aborted.append((name, trio.lowlevel.currently_ki_protected()))
            return trio.lowlevel.Abort.SUCCEEDED

        try:
            await trio.lowlevel.wait_task_rescheduled(abort)
        except trio.Cancelled as exc:
            seen.append((name, _HEX.sub("0x?", str(exc))))
            raise

    async def run(
        index: int, spec: TaskSpec, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        chain, nursery_inside = spec
        mine = [make(s, f"t{index}s{depth}") for depth, s in enumerate(chain)]
        chains.extend(mine)
        precancel.update((id(scope), s[2]) for scope, s in zip(mine, chain, strict=True))
        with contextlib.ExitStack() as stack:
            for scope in mine:
                stack.enter_context(scope)
            if nursery_inside:
                async with trio.open_nursery() as nursery:
                    for child in range(2):
                        await nursery.start(leaf, f"t{index}c{child}")
                    task_status.started()
                    await park(f"t{index}")
            else:
                task_status.started()
                await park(f"t{index}")

    async def leaf(
        name: str, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        with make((False, None, False), name):
            task_status.started()
            await park(name)

    unentered = make((False, None, False), "unentered")
    out: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        for index, spec in enumerate(tasks):
            await nursery.start(run, index, spec)
        await trio.testing.wait_all_tasks_blocked()
        for scope in chains:
            if precancel[id(scope)]:
                scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        aborted.clear()
        batch = [scopes[pick % len(scopes)] for pick in picks] + [unentered]
        if public:
            for scope in batch:
                scope.cancel()
        else:
            canceller = _scopes.Canceller()
            for scope in batch:
                canceller.add(scope)
            canceller.flush()
        out["after"] = {
            names[id(s)]: (
                s.cancel_called,
                s._cancel_status.effectively_cancelled if s._cancel_status else None,
                _reason(s),
            )
            for s in scopes
        }
        out["aborted"] = sorted(aborted)
        out["next_deadline"] = trio.lowlevel.current_statistics().seconds_to_next_deadline
        for scope in scopes:  # (a shielded scope would keep its task parked)
            scope.cancel()
    out["seen"] = sorted(seen)
    out["caught"] = {names[id(s)]: s.cancelled_caught for s in scopes}
    out["time"] = trio.current_time()
    return out


@pytest.mark.slow
@given(st.lists(task_st, min_size=1, max_size=4), st.lists(st.integers(0, 40), max_size=8))
def test_a_batch_leaves_every_scope_as_cancel_does(
    tasks: list[TaskSpec], picks: list[int]
) -> None:
    results = {}
    for mode in ("batch", "public"):
        results[mode] = trio.run(
            _play, tasks, picks, mode == "public",
            clock=trio.testing.MockClock(autojump_threshold=math.inf),
        )
    base = results["public"]
    assert all(protected for _, protected in base["aborted"])
    assert results["batch"] == base
