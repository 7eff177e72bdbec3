"""Crash recovery of a background child (issue 20, items 1 and 3): the rows a crash
left in SqliteCheckpoints are written by hand (the state each checkpoint would have
held), so the recovered conversation is exact. The real clock: the store writes
from a thread, which an autojumping clock would not wait for. The SIGKILL version of these paths is
``test_checkpoint_crash.py`` (its tree has a ``wait: false`` child)."""

from __future__ import annotations

import json
from pathlib import Path

import trio
import trio.lowlevel

from agentcore import (
    Checkpoint,
    CheckpointKind,
    FunctionTool,
    Message,
    ModelRequest,
    RunState,
    ToolCall,
)
from agentcore._run._checkpoint import snapshot
from agentcore.testing import ScriptedModel
from ledger import JsonlSink, query, verify
from subagent import (
    EventKind,
    Pool,
    Spec,
    SqliteCheckpoints,
    Stream,
    SubagentResultsTool,
    SubagentTool,
    open_pool,
)
from subagent._reply import RESULT_PREFIX
from tests.subagent._bgparts import START, STARTED, one_call_model


def root_model() -> ScriptedModel:
    def reply(request: ModelRequest) -> Message:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n == 0:
            return Message("assistant", "", tool_calls=[START])
        for m in request.messages:
            if m.role == "user" and m.content.startswith(RESULT_PREFIX):
                body = json.loads(m.content[len(RESULT_PREFIX):])
                return Message("assistant", f"root got {body['output']}")
        return Message("assistant", "", tool_calls=[
            ToolCall(f"wait{n}", "subagent_results", "{}")])

    return ScriptedModel(reply)


def bg_model() -> ScriptedModel:
    return one_call_model("work")


def register(pool: Pool, sink: JsonlSink, log: Path) -> None:
    async def work(arguments: str) -> str:
        with log.open("a") as f:
            f.write("work\n")
        await trio.lowlevel.checkpoint()
        return "worked"

    pool.register(Spec("root", model=root_model(), audit=sink,
                       tools=[SubagentTool(pool), SubagentResultsTool(pool)]))
    pool.register(Spec("bg", model=bg_model(), audit=sink,
                       tools=[FunctionTool("work", "work", {"type": "object"}, work)]))


def running_state(messages: list[Message], run_id: str, agent: str, input: str) -> RunState:
    path = ("root/0001", "bg/0002") if agent == "bg" else ("root/0001",)
    state = RunState.begin(messages, run_id=run_id, agent=agent, path=path, input=input)
    state.turn = sum(1 for m in messages if m.role == "assistant")
    return snapshot(state)


async def crashed(db: Path, *, start_in_flight: bool) -> None:
    """The rows a crash leaves: root running (after its start call, or with it in
    flight), and bg checkpointed at its first turn, tied to root's call ``start-bg``."""
    root_messages = [Message("user", "go"), Message("assistant", "", tool_calls=[START])]
    if not start_in_flight:
        root_messages.append(Message("tool", STARTED, tool_call_id="start-bg"))
    root = running_state(root_messages, "root/0001", "root", "go")
    bg = running_state([Message("user", "work")], "root/0001/bg/0002", "bg", "work")
    async with SqliteCheckpoints(db) as store:
        if start_in_flight:
            await store.write("root", None, None,
                              Checkpoint(CheckpointKind.call, root, ("start-bg",)))
        else:
            await store.write("root", None, None, Checkpoint(CheckpointKind.turn, root))
        await store.write("bg", "root/0001", "start-bg", Checkpoint(CheckpointKind.turn, bg))


async def recover(db: Path, ledger: Path, log: Path) -> tuple[list[str], list[str], int]:
    sink = JsonlSink(ledger)
    try:
        async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
            register(pool, sink, log)
            [task] = await pool.recover()
            result = await task.wait()
            accepted = pool.statistics().accepted
            assert await pool.recover() == []
    finally:
        await sink.aclose()
    return [m.content for m in result.messages], [e.kind for e in query(ledger)], accepted


async def test_a_checkpointed_background_child_is_delivered_to_its_recovered_parent(
    tmp_path: Path
) -> None:
    db, ledger, log = tmp_path / "c.db", tmp_path / "audit.jsonl", tmp_path / "log"
    await crashed(db, start_in_flight=False)
    contents, kinds, accepted = await recover(db, ledger, log)
    assert contents == [
        "go", "", STARTED, "", "1 result arrived (they follow as messages)",
        RESULT_PREFIX + json.dumps({"agent": "bg", "path": ["root/0001", "bg/0002"],
                                    "output": "bg done: worked"}),
        "root got bg done: worked",
    ]
    assert accepted == 2
    assert log.read_text() == "work\n"
    assert kinds.count("result_delivered") == 1
    assert kinds.count("run_resumed") == 2
    verify(ledger)


async def test_a_start_call_in_flight_continues_its_checkpointed_child(
    tmp_path: Path
) -> None:
    db, ledger, log = tmp_path / "c.db", tmp_path / "audit.jsonl", tmp_path / "log"
    await crashed(db, start_in_flight=True)
    contents, kinds, accepted = await recover(db, ledger, log)
    # The start call is continued: the checkpointed bg resumes, no second child.
    assert accepted == 2
    assert log.read_text() == "work\n"
    assert contents[2] == STARTED
    assert contents[-1] == "root got bg done: worked"
    assert kinds.count("result_delivered") == 1
    assert kinds.count("task_queued") == 2
    # bg continues its checkpoint (run_resumed), it does not start anew: one
    # run_resumed each, no second task. (Its checkpoint is at turn 0, before its first
    # model call, so the resumed bg records its prompt, as a run restarted from its
    # input does: see Run._resume.)
    assert (kinds.count("run_resumed"), kinds.count("prompt")) == (2, 1)
    verify(ledger)


async def test_a_background_child_whose_parent_ended_is_orphaned(
    tmp_path: Path
) -> None:
    db, ledger, log = tmp_path / "c.db", tmp_path / "audit.jsonl", tmp_path / "log"
    await crashed(db, start_in_flight=False)
    async with SqliteCheckpoints(db) as store:
        ended = RunState.begin([], run_id="root/0001", agent="root")
        await store.write("root", None, None, Checkpoint(CheckpointKind.ended, ended))
    sink = JsonlSink(ledger)
    events = []
    try:
        stream = Stream(100)
        async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store,
                                                             events=stream) as pool:
            register(pool, sink, log)
            assert await pool.recover() == []
            assert await pool.recover() == []  # reported once
            stream.close()
            async for event in stream:
                events.append((event.path, event.kind, event.call_id, event.error))
            assert [r.status for r in await store.rows()] == ["ended", "ended"]
    finally:
        await sink.aclose()
    error = "its parent run had ended before the crash: not resumed"
    assert events == [(("root/0001", "bg/0002"), EventKind.task_orphaned, "start-bg", error)]
    [entry] = query(ledger)
    assert (entry.kind, entry.run_id, entry.call_id, entry.error) == (
        "task_orphaned", "root/0001/bg/0002", "start-bg", error)
    assert not log.exists()
