"""A tree paused with a background child (``wait: false``), checkpointed, then the
process gone (issue 20): ``Pool.recover`` lists the paused tree *with* its background
child, and resuming it delivers the child's result once and runs the approved call
once. The real clock (the store writes from a thread); the order is set by events,
not by time: root's ``hold`` call waits until its background child has paused, and
the child's first turn waits until ``hold`` has started (or, ``pause_first``, root's
second turn waits until the child has paused: root pauses before ``hold`` starts)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable
from pathlib import Path

import pytest
import trio

import agentcore
from agentcore import (
    BackgroundChild,
    CallStatus,
    Checkpoint,
    CheckpointKind,
    FunctionTool,
    Message,
    ModelRequest,
    ModelResponse,
    RunState,
    ToolCall,
)
from agentcore.testing import ScriptedModel
from ledger import JsonlSink, query, verify
from subagent import (
    Pool,
    Spec,
    SqliteCheckpoints,
    SubagentResultsTool,
    SubagentTool,
    TaskError,
    TaskPaused,
    open_pool,
)
from subagent._current import current_task
from subagent._durable._claims import resume_key
from subagent._reply import RESULT_PREFIX
from tests.agentcore._durable import gate
from tests.subagent._bgparts import START, STARTED, one_call_model

RESULT = RESULT_PREFIX + json.dumps(
    {"agent": "bg", "path": ["root/0001", "bg/0002"], "output": "bg done: bwrite written"})


async def children_ended() -> None:
    # Until the current task's children have ended (the background child paused).
    task = current_task.get()
    assert task is not None
    for child in task.children:
        with contextlib.suppress(TaskError):
            await child.wait()


def root_model(pause_first: bool) -> ScriptedModel:
    async def hold_after_pause() -> Message:
        # The child's pause asks root's run to pause while this turn runs: the run
        # pauses once the turn has ended, before its call ``h1`` starts.
        await children_ended()
        return Message("assistant", "", tool_calls=[ToolCall("h1", "hold", "{}")])

    def reply(request: ModelRequest) -> Message | Awaitable[Message]:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n == 0:
            return Message("assistant", "", tool_calls=[START])
        if n == 1:
            if pause_first:
                return hold_after_pause()
            return Message("assistant", "", tool_calls=[ToolCall("h1", "hold", "{}")])
        for m in request.messages:
            if m.role == "user" and m.content.startswith(RESULT_PREFIX):
                body = json.loads(m.content[len(RESULT_PREFIX):])
                return Message("assistant", f"root got {body.get('output', body.get('error'))}")
        return Message("assistant", "", tool_calls=[ToolCall(f"wait{n}", "subagent_results", "{}")])

    return ScriptedModel(reply)


def bg_model(holding: trio.Event | None) -> ScriptedModel:
    # ``bwrite``'s call (b1) and the answer after it; its first turn waits until
    # ``holding`` is set (root's ``hold`` started), when given.
    calls = one_call_model("bwrite")

    async def reply(request: ModelRequest) -> ModelResponse:
        if holding is not None and not any(m.role == "assistant" for m in request.messages):
            await holding.wait()
        return await calls.complete(request)

    return ScriptedModel(reply)


def register(pool: Pool, sink: JsonlSink, log: Path, *, pause_first: bool = False) -> None:
    holding = trio.Event()

    async def hold(arguments: str) -> str:
        # Until the background child has paused (its gate deferred b1): the pause of
        # the child then pauses root after this call.
        holding.set()
        await children_ended()
        return "held"

    async def bwrite(arguments: str) -> str:
        with log.open("a") as f:
            f.write(f"bwrite {arguments}\n")
        await trio.lowlevel.checkpoint()
        return "bwrite written"

    pool.register(Spec("root", model=root_model(pause_first), audit=sink, tools=[
        SubagentTool(pool), SubagentResultsTool(pool),
        FunctionTool("hold", "hold", {"type": "object"}, hold, read_only=True)]))
    pool.register(Spec("bg", model=bg_model(None if pause_first else holding), audit=sink,
                       gate=gate("b1", None),
                       tools=[FunctionTool("bwrite", "bwrite", {"type": "object"}, bwrite)]))


async def test_a_paused_background_child_is_recovered_with_its_paused_root(
    tmp_path: Path
) -> None:
    db, ledger, log = tmp_path / "c.db", tmp_path / "audit.jsonl", tmp_path / "log"
    sink = JsonlSink(ledger)
    try:
        async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
            register(pool, sink, log)
            with pytest.raises(TaskPaused):
                await (await pool.submit("root", "go")).wait()
        # The pool gone (as after a crash once the tree paused): a new one recovers it.
        async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
            register(pool, sink, log)
            recovered = await pool.recover()
            assert list(recovered) == []
            [tree] = recovered.paused
            assert tree.name == "root"
            [child] = tree.state.children
            assert child.background == BackgroundChild("start-bg", "bg")
            assert child.paused
            approvals = [(a.path, a.call_id, a.tool) for a in tree.state.pending_approvals]
            assert approvals == [(("root/0001", "bg/0002"), "b1", "bwrite")]
            tree.state.approve("b1", by="alice")
            result = await (await pool.resume(tree.state, name=tree.name)).wait()
            again = await pool.recover()
            assert (list(again), again.paused) == ([], ())
    finally:
        await sink.aclose()
    assert result.output == "root got bg done: bwrite written"
    assert [m.content for m in result.messages] == [
        "go", "", STARTED, "", "held", "", "1 result arrived (they follow as messages)",
        RESULT, "root got bg done: bwrite written",
    ]
    assert log.read_text() == "bwrite {}\n"
    kinds = [e.kind for e in query(ledger)]
    assert kinds.count("result_delivered") == 1
    assert kinds.count("task_orphaned") == 0
    verify(ledger)


async def test_a_crash_right_after_the_resume_was_claimed_runs_the_approved_call_once(
    tmp_path: Path
) -> None:
    db, ledger, log = tmp_path / "c.db", tmp_path / "audit.jsonl", tmp_path / "log"
    sink = JsonlSink(ledger)
    try:
        async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
            register(pool, sink, log)
            with pytest.raises(TaskPaused) as info:
                await (await pool.submit("root", "go")).wait()
            state = info.value.state
            state.approve("b1", by="alice")
            # What Pool.resume records first; the process dies before the tree runs.
            assert await store.claim("root", state, resume_key(state)) is True
        # The claimed row nests the paused child; its own row is there too.
        async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
            register(pool, sink, log)
            recovered = await pool.recover()
            assert (recovered.paused, recovered.failed) == ((), ())
            [task] = recovered
            result = await task.wait()
            assert pool.statistics().accepted == 2
    finally:
        await sink.aclose()
    assert result.output == "root got bg done: bwrite written"
    assert log.read_text() == "bwrite {}\n"
    kinds = [e.kind for e in query(ledger)]
    assert kinds.count("result_delivered") == 1
    assert kinds.count("task_orphaned") == 0
    verify(ledger)


async def test_a_crash_right_after_claiming_a_root_paused_before_its_call_runs_it_once(
    tmp_path: Path
) -> None:
    # The child paused while root's second turn ran: root paused once that turn
    # ended, before its call h1 started (h1 without a result, nothing in flight). Its
    # claimed resume holds it so, and is recovered (h1 runs then), not refused.
    db, ledger, log = tmp_path / "c.db", tmp_path / "audit.jsonl", tmp_path / "log"
    sink = JsonlSink(ledger)
    try:
        async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
            register(pool, sink, log, pause_first=True)
            with pytest.raises(TaskPaused) as info:
                await (await pool.submit("root", "go")).wait()
            state = info.value.state
            assert [(p.call.id, p.status) for p in state.pending] == [
                ("h1", CallStatus.waiting)]
            state.approve("b1", by="alice")
            assert await store.claim("root", state, resume_key(state)) is True
        async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
            register(pool, sink, log, pause_first=True)
            recovered = await pool.recover()
            assert (recovered.paused, recovered.failed) == ((), ())
            [task] = recovered
            result = await task.wait()
            assert pool.statistics().accepted == 2
    finally:
        await sink.aclose()
    assert result.output == "root got bg done: bwrite written"
    # h1 waited for the resumed child: its result arrived while h1 ran.
    assert [m.content for m in result.messages] == [
        "go", "", STARTED, "", "held", RESULT, "root got bg done: bwrite written"]
    assert log.read_text() == "bwrite {}\n"
    kinds = [e.kind for e in query(ledger)]
    assert kinds.count("result_delivered") == 1
    assert kinds.count("task_orphaned") == 0
    verify(ledger)


async def _paused(db: Path, sink: JsonlSink, log: Path) -> RunState:
    async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
        register(pool, sink, log)
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("root", "go")).wait()
    return info.value.state


async def test_a_crash_before_the_paused_row_held_its_children_loses_none(
    tmp_path: Path
) -> None:
    db, ledger, log = tmp_path / "c.db", tmp_path / "audit.jsonl", tmp_path / "log"
    sink = JsonlSink(ledger)
    try:
        state = await _paused(db, sink, log)
        # The root's row as its run's paused checkpoint left it (before its background
        # child was nested): the child is in its own row only.
        alone = RunState.from_json(state.to_json())
        alone.children = []
        async with SqliteCheckpoints(db) as store:
            await store.write("root", None, None, Checkpoint(CheckpointKind.paused, alone))
        async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
            register(pool, sink, log)
            recovered = await pool.recover()
            [tree] = recovered.paused
            [child] = tree.state.children
            assert child.background == BackgroundChild("start-bg", "bg")
            assert [a.call_id for a in tree.state.pending_approvals] == ["b1"]
            tree.state.approve("b1", by="alice")
            result = await (await pool.resume(tree.state, name=tree.name)).wait()
    finally:
        await sink.aclose()
    assert result.output == "root got bg done: bwrite written"
    assert log.read_text() == "bwrite {}\n"
    assert [e.kind for e in query(ledger)].count("result_delivered") == 1
    verify(ledger)


async def test_a_nested_child_whose_own_run_ended_is_not_run_again(tmp_path: Path) -> None:
    db, ledger, log = tmp_path / "c.db", tmp_path / "audit.jsonl", tmp_path / "log"
    sink = JsonlSink(ledger)
    try:
        state = await _paused(db, sink, log)
        state.approve("b1", by="alice")
        [child] = state.children
        async with SqliteCheckpoints(db) as store:
            assert await store.claim("root", state, resume_key(state)) is True
            # The child was resumed and ended (its approved b1 ran in the lost
            # process); its result never reached root's next checkpoint.
            await store.write("bg", "root/0001", "start-bg",
                              Checkpoint(CheckpointKind.ended, child))
        async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
            register(pool, sink, log)
            recovered = await pool.recover()
            assert (recovered.paused, recovered.failed) == ((), ())
            [task] = recovered
            result = await task.wait()
            assert pool.statistics().accepted == 1
    finally:
        await sink.aclose()
    lost = ("subagent root/0001/bg/0002: it ended after its tree was resumed, before "
            "the crash; its result was lost")
    assert result.output == f"root got {lost}"
    assert not log.exists()
    assert [e.kind for e in query(ledger)].count("result_delivered") == 1
    verify(ledger)


def register_twice(pool: Pool, sink: JsonlSink, log: Path) -> None:
    # root starts bg and waits for its result (subagent_results, again after each
    # pause); bg's bwrite calls b1 and b2 are each deferred for a human.
    def root(request: ModelRequest) -> Message:
        n = sum(1 for m in request.messages if m.role == "assistant")
        for m in request.messages:
            if m.role == "user" and m.content.startswith(RESULT_PREFIX):
                body = json.loads(m.content[len(RESULT_PREFIX):])
                return Message("assistant", f"root got {body['output']}")
        call = START if n == 0 else ToolCall(f"wait{n}", "subagent_results", "{}")
        return Message("assistant", "", tool_calls=[call])

    def bg(request: ModelRequest) -> Message:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n < 2:
            return Message("assistant", "", tool_calls=[ToolCall(f"b{n + 1}", "bwrite", "{}")])
        return Message("assistant", "bg done: both written")

    async def bwrite(arguments: str) -> str:
        with log.open("a") as f:
            f.write("bwrite\n")
        await trio.lowlevel.checkpoint()
        return "bwrite written"

    async def ask(request: agentcore.GateRequest) -> agentcore.GateDecision:
        await trio.lowlevel.checkpoint()
        return agentcore.GateDecision.defer("ask a human")

    pool.register(Spec("root", model=ScriptedModel(root), audit=sink,
                       tools=[SubagentTool(pool), SubagentResultsTool(pool)]))
    pool.register(Spec("bg", model=ScriptedModel(bg), audit=sink, gate=ask,
                       tools=[FunctionTool("bwrite", "bwrite", {"type": "object"}, bwrite)]))


async def test_a_background_child_paused_again_after_its_resume_is_recovered(
    tmp_path: Path
) -> None:
    # Resumed with its tree, the background child runs as its own run: its next paused
    # row holds its state unmarked (once stored marked as a background child, recover()
    # refused the tree as a bad state: CheckpointError, the tree lost).
    db, ledger, log = tmp_path / "c.db", tmp_path / "audit.jsonl", tmp_path / "log"
    sink = JsonlSink(ledger)
    try:
        async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
            register_twice(pool, sink, log)
            with pytest.raises(TaskPaused) as first:
                await (await pool.submit("root", "go")).wait()
            state = first.value.state
            assert [a.call_id for a in state.pending_approvals] == ["b1"]
            state.approve("b1", by="alice")
            with pytest.raises(TaskPaused) as second:
                await (await pool.resume(state)).wait()
            assert [a.call_id for a in second.value.state.pending_approvals] == ["b2"]
        # The pool gone with the tree paused the second time: recovered from its rows.
        async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
            register_twice(pool, sink, log)
            recovered = await pool.recover()
            assert (list(recovered), recovered.failed) == ([], ())
            [tree] = recovered.paused
            [child] = tree.state.children
            assert child.background == BackgroundChild("start-bg", "bg")
            assert [(a.path, a.call_id) for a in tree.state.pending_approvals] == [
                (("root/0001", "bg/0002"), "b2")]
            tree.state.approve("b2", by="alice")
            result = await (await pool.resume(tree.state, name=tree.name)).wait()
            again = await pool.recover()
            assert (list(again), again.paused, again.failed) == ([], (), ())
    finally:
        await sink.aclose()
    assert result.output == "root got bg done: both written"
    assert log.read_text() == "bwrite\n" * 2
    verify(ledger)
