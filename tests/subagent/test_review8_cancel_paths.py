"""An attacker's review of the pool's cancel paths (``subagent._pool._scopes``: the cancels
of one step made as a batch, last): over random workloads the pool behaves exactly as
it did before the batches: each cancel made at once, in the order of the pool's
effects (``before``).

A workload is a few root tasks, each blocked somewhere when it is cancelled: in its
model call, in a tool, in a shielded tool, under a ``move_on_after`` in a tool, in a
tool that catches the Cancelled and returns, in parallel tool calls (a nursery in the
run), delegating to a child (its slot lent; opaque delegations are cut by their
``tool_timeout`` and take their slot back shielded, the pool's ``_reclaim`` scope),
or leaking a cancel scope from a tool (misnesting); with or without a ``timeout``
and an ``idle_timeout`` (a deadline in the task's scope). Tasks are cancelled in
random order at random virtual times, some twice, some by ``pool.cancel()``, some
from inside a run, some by cancelling a scope around the pool; some interrupted. Each
mode runs the same workload with trio's scheduler seeded alike; what is compared:
each task's outcome (status, result or error text), every event, every audit
entry, what the tools and models saw of their Cancelled (text, source,
``cancelled_caught``), the pool's statistics, the virtual end time, and that no task
is left behind.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import trio
import trio._core._run as trio_run
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from agentcore import (
    FunctionTool,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
)
from ledger import MemorySink
from subagent import Defaults, Pool, Spec, Stream, SubagentTool, Task, open_pool
from subagent._pool import _scopes
from tests.subagent.test_slot_reclaim import Opaque

BEHAVIOURS = (
    "model", "quick", "block", "shield", "moveon", "catch", "parallel",
    "delegate", "opaque", "leak", "mleak", "poolcancel", "cancelfirst", "mcatch",
    "delegate2", "background",
)
# "batch": the pool's cancels of one step made last, in order (subagent._pool._scopes);
# "before": each cancel made at once, in the order of the pool's effects.
MODES = ("batch", "before")

_HEX = re.compile(r"0x[0-9a-f]+")
_TIME = re.compile(r"\btime=[0-9.e+-]+")
_ID = re.compile(
    r"\b[0-9a-f]{32}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
)


def norm(text: object) -> str:
    """``text`` without memory addresses, random ids and wall times."""
    return _TIME.sub("time=?", _ID.sub("<id>", _HEX.sub("0x?", str(text))))


class Model:
    """Plays each task's behaviour from its task text (``<behaviour> <n>``), step by
    the tool results so far; keeps what every Cancelled it saw said."""

    def __init__(self, seen: list[tuple[str, ...]]) -> None:
        self.seen = seen

    async def complete(self, request: ModelRequest) -> ModelResponse:
        task = next(m.content for m in request.messages if m.role == "user")
        behaviour, name = task.split(" ", 1)
        done = sum(1 for m in request.messages if m.role == "tool")
        try:
            if done == 0 and behaviour == "model":
                await trio.sleep_forever()
            if done == 0 and behaviour == "mleak":
                trio.CancelScope().__enter__()
            await trio.sleep(0.5)
            if done == 0 and behaviour == "mcatch":
                await trio.sleep_forever()
        except trio.Cancelled as exc:
            self.seen.append(("model", name, norm(exc), str(exc.source)))
            if behaviour != "mcatch":
                raise
            return ModelResponse(Message("assistant", f"caught {name}"))
        calls: tuple[ToolCall, ...] = ()
        if done == 0:
            if behaviour in ("block", "shield", "moveon", "catch", "leak", "poolcancel",
                             "cancelfirst"):
                calls = (ToolCall(f"{name}-0", behaviour, "{}"),)
            elif behaviour == "parallel":
                calls = (ToolCall(f"{name}-0", "block", "{}"),
                         ToolCall(f"{name}-1", "shield", "{}"))
            elif behaviour in ("delegate", "opaque", "delegate2", "background"):
                child = {"delegate2": "parallel", "background": "shield"}.get(behaviour, "model")
                call: dict[str, Any] = {"agent": "w", "task": f"{child} {name}.c"}
                if behaviour == "background":
                    call["wait"] = False
                calls = (ToolCall(f"{name}-0", "subagent", json.dumps(call)),)
        elif done == 1 and behaviour == "background":
            await trio.sleep(1)
        if calls:
            return ModelResponse(Message("assistant", tool_calls=calls), "tool_calls")
        return ModelResponse(Message("assistant", f"done {name}"))


def _tools(seen: list[tuple[str, ...]], pool: Pool, tasks: list[Task]) -> list[FunctionTool]:
    async def block(arguments: str) -> str:
        try:
            await trio.sleep_forever()
        except trio.Cancelled as exc:
            seen.append(("block", norm(exc)))
            raise
        raise AssertionError("unreachable")

    async def shield(arguments: str) -> str:
        with trio.CancelScope(shield=True) as scope:
            await trio.sleep(2)
        seen.append(("shield", str(scope.cancelled_caught)))
        return "shielded"

    async def moveon(arguments: str) -> str:
        with trio.move_on_after(1) as scope:
            await trio.sleep_forever()
        seen.append(("moveon", str(scope.cancelled_caught)))
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def catch(arguments: str) -> str:
        try:
            await trio.sleep_forever()
        except trio.Cancelled as exc:
            seen.append(("catch", norm(exc)))
        return "caught"

    async def leak(arguments: str) -> str:
        trio.CancelScope().__enter__()
        return "leaked"

    async def poolcancel(arguments: str) -> str:
        # The pool cancelled from inside one of its runs (its own scope among them).
        pool.cancel()
        try:
            await trio.sleep(1)
        except trio.Cancelled as exc:
            seen.append(("poolcancel", norm(exc)))
            raise
        return "not cancelled"

    async def cancelfirst(arguments: str) -> str:
        # The first task cancelled from inside a run (maybe this run's own).
        tasks[0].cancel()
        try:
            await trio.sleep(1)
        except trio.Cancelled as exc:
            seen.append(("cancelfirst", norm(exc)))
            raise
        return "not cancelled"

    return [
        FunctionTool("poolcancel", "cancels the pool", {}, poolcancel),
        FunctionTool("cancelfirst", "cancels the first task", {}, cancelfirst),
        FunctionTool("block", "blocks", {}, block, read_only=True),
        FunctionTool("shield", "shielded sleep", {}, shield, read_only=True),
        FunctionTool("moveon", "move_on_after", {}, moveon),
        FunctionTool("catch", "catches", {}, catch),
        FunctionTool("leak", "leaks a scope", {}, leak),
    ]


Op = tuple[float, str]  # (virtual seconds to wait, then cancel: a task index, "pool", "-")


async def _play(
    roots: list[tuple[str, int]], ops: list[Op], max_concurrent: int
) -> dict[str, Any]:
    living = trio.lowlevel.current_statistics().tasks_living
    seen: list[tuple[str, ...]] = []
    model = Model(seen)
    audit = MemorySink()
    events = Stream(100_000)
    out: dict[str, Any] = {}
    outcomes: list[str] = []
    tasks: list[Task] = []
    try:
        with trio.CancelScope() as outer:
            async with open_pool(
                max_concurrent=max_concurrent, events=events,
                defaults=Defaults(model=model, audit=audit),
            ) as pool:
                tools: list[Any] = [*_tools(seen, pool, tasks), SubagentTool(pool)]
                opaque: list[Any] = [*_tools(seen, pool, tasks), Opaque(pool)]
                for limits in range(4):
                    timeout = 3.0 if limits & 1 else None
                    idle = 2.5 if limits & 2 else None
                    pool.register(Spec(f"w{limits}", tools=tools, timeout=timeout,
                                       idle_timeout=idle))
                    pool.register(Spec(f"o{limits}", tools=opaque, timeout=timeout,
                                       idle_timeout=idle, tool_timeout=1.0))
                pool.register(Spec("w", tools=tools))
                for i, (behaviour, limits) in enumerate(roots):
                    agent = f"{'o' if behaviour == 'opaque' else 'w'}{limits}"
                    tasks.append(await pool.submit(agent, f"{behaviour} t{i}"))
                for wait, target in ops:
                    await trio.sleep(wait)
                    if target == "pool":
                        pool.cancel()
                    elif target == "outer":
                        outer.cancel()
                    elif target.startswith("i"):
                        tasks[int(target[1:]) % len(tasks)].interrupt()
                    elif target != "-":
                        tasks[int(target) % len(tasks)].cancel()
                await trio.sleep(5)
                out["stats_before"] = repr(pool.statistics())
                pool.cancel()
            out["stats"] = repr(pool.statistics())
        out["outer_caught"] = outer.cancelled_caught
    except BaseException as exc:
        out["raised"] = f"{type(exc).__name__}: {norm(exc)}"
    for task in tasks:
        try:
            result = await task.wait()
        except BaseException as exc:
            outcomes.append(f"{task.status} {type(exc).__name__}: {norm(exc)}")
        else:
            outcomes.append(f"{task.status} {norm(result.output)} {result.summary}")
    out["outcomes"] = outcomes
    out["time"] = trio.current_time()
    events.close()
    out["events"] = [norm(e) async for e in events]
    out["audit"] = [
        (e.kind, e.path, e.tool, e.call_id, norm(e.result), norm(e.error), e.duration,
         norm(dict(e.data)))
        for e in audit.entries
    ]
    out["seen"] = sorted(seen)
    stats = trio.lowlevel.current_statistics()
    out["tasks_left"] = stats.tasks_living - living
    out["next_deadline"] = stats.seconds_to_next_deadline
    return out


def _run(roots: list[tuple[str, int]], ops: list[Op], max_concurrent: int,
         seed: int) -> dict[str, Any]:
    trio_run._r.seed(seed)
    return trio.run(_play, roots, ops, max_concurrent,
                    clock=trio.testing.MockClock(autojump_threshold=0))


roots_st = st.lists(
    st.tuples(st.sampled_from(BEHAVIOURS), st.integers(0, 3)), min_size=1, max_size=5
)
ops_st = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5, 2.75, 4.0]),
        st.sampled_from(["0", "1", "2", "3", "4", "pool", "outer", "i0", "i1", "-"]),
    ),
    max_size=6,
)


@pytest.mark.slow
@given(roots_st, ops_st, st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_every_mode_ends_a_workload_alike(
    roots: list[tuple[str, int]], ops: list[Op], max_concurrent: int, seed: int
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        results = {}
        for mode in MODES:
            monkeypatch.undo()
            if mode == "before":
                monkeypatch.setattr(_scopes.Canceller, "add", _scopes.Canceller.cancel)
            results[mode] = _run(roots, ops, max_concurrent, seed)
    base = results["batch"]
    assert base["tasks_left"] == 0
    assert "stack corrupted" not in base.get("raised", "") or any(
        b == "mleak" for b, _ in roots
    )
    for mode in ("before",):
        got = results[mode]
        assert sorted(got) == sorted(base), mode
        for key in base:
            assert got[key] == base[key], (mode, key)
