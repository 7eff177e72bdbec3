"""A long-lived pool keeps flat memory: no per-task state outlives a task that has ended
and that its caller has dropped (issue 15, item 3).

Tasks of every kind go through one pool on the mock clock (finished, failed, cancelled
while queued and while running, delegating, background with the results tool, every
event to a stream that a consumer drains) and the memory tracemalloc traces from the
end of a warm-up (the first half: tracing makes a task 4x slower) to the end must not
grow by more than 24 bytes per task. Tracing starts after the warm-up, which only
makes the measure stricter: a free of an object allocated before it is not
subtracted. The size is 10,000 tasks in CI (5,000 traced) and 50,000 with
``HYPOTHESIS_PROFILE=long`` (or ``SOAK_TASKS=n``). A warm-up of 5,000 tasks measures
what one of 15,000 does (9 to 12 bytes per task with no leak; a pool that keeps one
``object()`` per task fails: 39.6 bytes per task).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import tracemalloc

import pytest
import trio
import trio.testing

from agentcore import Message, ModelError, ModelRequest, ModelResponse, ToolCall
from subagent import Pool, Spec, Stream, SubagentResultsTool, SubagentTool, TaskError, open_pool

#: Bytes of traced memory one task may leave behind, at most (issue 15).
PER_TASK = 24


def _soak_size() -> int:
    size = os.environ.get("SOAK_TASKS")
    if size is not None:
        return int(size)
    return 50_000 if os.environ.get("HYPOTHESIS_PROFILE") == "long" else 10_000


def _call(number: int, name: str, arguments: dict[str, object]) -> ModelResponse:
    call = ToolCall(f"c{number}", name, json.dumps(arguments))
    return ModelResponse(Message("assistant", tool_calls=(call,)), "tool_calls")


class SoakModel:
    """Plays each task by its text: ``ok`` answers after 1 s, ``fail`` raises, ``hang``
    waits to be cancelled, ``parent`` delegates one ``ok`` and waits for it, ``bg``
    starts one ``ok`` in the background and waits for it with the results tool."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        text = next(m.content for m in request.messages if m.role == "user")
        done = sum(1 for m in request.messages if m.role == "tool")
        await trio.sleep(1.0)
        if text == "fail":
            raise ModelError("soak failure")
        if text == "hang":
            await trio.sleep_forever()
        if text == "parent" and done == 0:
            return _call(done, "subagent", {"agent": "w", "task": "ok"})
        if text == "bg" and done == 0:
            return _call(done, "subagent", {"agent": "w", "task": "ok", "wait": False})
        if text == "bg" and done == 1:
            return _call(done, "subagent_results", {})
        return ModelResponse(Message("assistant", f"done {text}"))


async def _round(pool: Pool) -> int:
    # One round of every kind of task; returns how many tasks it ran (children included).
    hangs = [await pool.submit("w", "hang") for _ in range(2)]
    queued = pool.submit_nowait("w", "ok")
    queued.cancel()  # both slots are held: cancelled while queued
    await trio.testing.wait_all_tasks_blocked()
    for task in hangs:
        task.cancel()  # cancelled while running
    others = [await pool.submit("w", text) for text in ("ok", "fail", "parent", "bg")]
    for task in [*hangs, queued, *others]:
        with contextlib.suppress(TaskError):
            await task.wait()
    return 2 + 1 + 4 + 2  # the parent's and the background run's children


def _collect() -> None:
    # Free cyclic garbage, and drop trio's stale deadline entries: trio keeps a cancel
    # scope whose deadline moved, or that exited before it, in its deadline heap until
    # about a thousand such entries pile up, then prunes them. That is bounded, but as
    # large as what the soak measures, so both measures are taken just after a prune.
    gc.collect()
    trio._core._run.GLOBAL_RUN_CONTEXT.runner.deadlines._prune()


async def _soak(total: int, warm_up: int) -> tuple[int, int, int]:
    # (traced bytes after warm-up, traced bytes at the end, tasks between the two);
    # tracemalloc traces from the end of the warm-up.
    events = Stream(64)
    counted = 0

    async def consume() -> None:
        nonlocal counted
        async for _ in events:
            counted += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with open_pool(max_concurrent=2, events=events) as pool:
            pool.register(Spec("w", model=SoakModel(), timeout=3600.0, tools=[
                SubagentTool(pool), SubagentResultsTool(pool)]))
            ran = 0
            while ran < warm_up:
                ran += await _round(pool)
            _collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            start = ran
            while ran < total:
                ran += await _round(pool)
            _collect()
            after = tracemalloc.get_traced_memory()[0]
            stats = pool.statistics()
            assert stats.accepted == ran
            assert (stats.running, stats.queued) == (0, 0)
        events.close()
    assert counted > ran
    return before, after, ran - start


@pytest.mark.slow
def test_a_long_lived_pool_holds_flat_memory() -> None:
    total = _soak_size()
    try:
        before, after, tasks = trio.run(
            _soak, total, total // 2, clock=trio.testing.MockClock(autojump_threshold=0)
        )
    finally:
        tracemalloc.stop()
    growth = after - before
    assert growth < PER_TASK * tasks, (
        f"{growth} bytes more after {tasks} tasks ({growth / tasks:.1f} B per task)"
    )
