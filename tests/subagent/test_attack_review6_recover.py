"""Review 6's holes in crash recovery: a finished delegated child's kept answer
(``_durable._kept``) answers only the delegating call it was kept for, never another call in
flight that reuses its id (a model's call ids are its own: some reuse ``call_0`` on
every turn)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentcore import (
    BackgroundChild,
    Checkpoint,
    CheckpointKind,
    FunctionTool,
    Message,
    ModelRequest,
    ToolCall,
)
from agentcore._run._checkpoint import INTERRUPTED
from agentcore.testing import ScriptedModel
from ledger import JsonlSink
from subagent import (
    CheckpointError,
    Spec,
    SqliteCheckpoints,
    SubagentResultsTool,
    SubagentTool,
    open_pool,
)
from subagent._reply import RESULT_PREFIX
from tests.subagent._bgparts import START, STARTED
from tests.subagent.test_bg_result_crash import _kept
from tests.subagent.test_recover_background import register, running_state

WAIT = ToolCall("call_0", "subagent", '{"agent": "bg", "task": "work"}')
ANSWER = json.dumps({"agent": "bg", "path": ["root/0001", "bg/0002"],
                     "output": "bg done: worked"})


def _root() -> ScriptedModel:
    # root answers with the last tool result it got.
    return ScriptedModel(lambda r: Message("assistant", f"root got {r.messages[-1].content}"))


async def _recover(tmp_path: Path, root_messages: list[Message]) -> list[str]:
    # root delegated to bg as call_0 (bg finished: its answer kept), then its next
    # call, in flight at the crash, has the same id.
    db, log, writes = tmp_path / "c.db", tmp_path / "log", tmp_path / "writes"
    root = running_state(root_messages, "root/0001", "root", "go")
    bg = running_state([Message("user", "work")], "root/0001/bg/0002", "bg", "work")
    answer = _kept("call_0")
    answer.background = BackgroundChild("call_0", "bg", ANSWER, "bg done: worked", None)
    async with SqliteCheckpoints(db) as store:
        await store.write("bg", "root/0001", "call_0", Checkpoint(CheckpointKind.ended, bg))
        await store.write_kept("bg", "root/0001", "call_0", answer)
        await store.write("root", None, None,
                          Checkpoint(CheckpointKind.call, root, ("call_0",)))

    async def write(arguments: str) -> str:
        with writes.open("a") as f:
            f.write("write\n")
        return "written"

    sink = JsonlSink(tmp_path / "audit.jsonl")
    async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
        register(pool, sink, log)
        pool.register(Spec("root", model=_root(), tools=[
            SubagentTool(pool), FunctionTool("write", "write", {"type": "object"}, write)]))
        [task] = await pool.recover()
        result = await task.wait()
    await sink.aclose()
    assert not writes.exists() and not log.exists()
    return [m.content for m in result.messages]


async def test_a_kept_answer_does_not_answer_another_tool_call_of_the_same_id(
    tmp_path: Path,
) -> None:
    write = ToolCall("call_0", "write", "{}")
    messages = [Message("user", "go"), Message("assistant", "", tool_calls=[WAIT]),
                Message("tool", ANSWER, tool_call_id="call_0"),
                Message("assistant", "", tool_calls=[write])]
    contents = await _recover(tmp_path, messages)
    assert contents[:4] == ["go", "", ANSWER, ""]
    assert contents[4] != ANSWER and INTERRUPTED in contents[4]
    assert contents[5] == f"root got {contents[4]}"


async def test_a_kept_answer_does_not_answer_a_delegation_of_another_task(
    tmp_path: Path,
) -> None:
    other = ToolCall("call_0", "subagent", '{"agent": "bg", "task": "other work"}')
    messages = [Message("user", "go"), Message("assistant", "", tool_calls=[WAIT]),
                Message("tool", ANSWER, tool_call_id="call_0"),
                Message("assistant", "", tool_calls=[other])]
    contents = await _recover(tmp_path, messages)
    assert contents[4] != ANSWER and INTERRUPTED in contents[4]


async def test_the_kept_answer_still_answers_its_own_call(tmp_path: Path) -> None:
    messages = [Message("user", "go"), Message("assistant", "", tool_calls=[WAIT])]
    contents = await _recover(tmp_path, messages)
    assert contents == ["go", "", ANSWER, f"root got {ANSWER}"]


def test_recovery_knows_the_delegation_tools_name() -> None:
    from subagent._durable._tree import DELEGATION

    assert DELEGATION == SubagentTool.name == "subagent"


async def test_a_second_recovery_through_a_symlink_to_the_file_is_refused(
    tmp_path: Path,
) -> None:
    # The writer lock is the file's, not its name's: a recovery (or writer) that names
    # the same database through a symbolic link is refused like one that names it.
    db, link = tmp_path / "c.db", tmp_path / "link.db"
    link.symlink_to(db)
    async with SqliteCheckpoints(db) as first:
        assert await first.recovering() == []
        second = SqliteCheckpoints(link)
        with pytest.raises(CheckpointError) as info:
            await second.recovering()
        await second.aclose()
    assert str(info.value) == (
        "cannot open the checkpoint database: another SqliteCheckpoints is writing to "
        "it (here or in another process)")



def _root_after_bg() -> ScriptedModel:
    # root: answers bg's result when it comes, else says what its last call got.
    def reply(request: ModelRequest) -> Message:
        for m in request.messages:
            if m.role == "user" and m.content.startswith(RESULT_PREFIX):
                body = json.loads(m.content[len(RESULT_PREFIX):])
                return Message("assistant", f"root got {body['output']}")
        return Message("assistant", "", tool_calls=[
            ToolCall("wait", "subagent_results", "{}")])

    return ScriptedModel(reply)


async def test_a_background_child_is_not_taken_for_a_tool_call_of_its_id(
    tmp_path: Path,
) -> None:
    # root started bg in the background as start-bg, then called write under the same
    # id; the crash came during write, bg still running. write must not run again (a
    # child recovered for it would make its tool continue it: run it again), and bg is
    # recovered as root's background child.
    db, log, writes = tmp_path / "c.db", tmp_path / "log", tmp_path / "writes"
    write = ToolCall("start-bg", "write", "{}")
    messages = [Message("user", "go"), Message("assistant", "", tool_calls=[START]),
                Message("tool", STARTED, tool_call_id="start-bg"),
                Message("assistant", "", tool_calls=[write])]
    root = running_state(messages, "root/0001", "root", "go")
    bg = running_state([Message("user", "work")], "root/0001/bg/0002", "bg", "work")
    async with SqliteCheckpoints(db) as store:
        await store.write("bg", "root/0001", "start-bg", Checkpoint(CheckpointKind.turn, bg))
        await store.write("root", None, None,
                          Checkpoint(CheckpointKind.call, root, ("start-bg",)))

    async def write_tool(arguments: str) -> str:
        with writes.open("a") as f:
            f.write("write\n")
        return "written"

    sink = JsonlSink(tmp_path / "audit.jsonl")
    async with SqliteCheckpoints(db) as store, open_pool(checkpoints=store) as pool:
        register(pool, sink, log)
        pool.register(Spec("root", model=_root_after_bg(), tools=[
            SubagentTool(pool), SubagentResultsTool(pool),
            FunctionTool("write", "write", {"type": "object"}, write_tool)]))
        [task] = await pool.recover()
        result = await task.wait()
    await sink.aclose()
    assert not writes.exists()
    contents = [m.content for m in result.messages]
    assert contents[:4] == ["go", "", STARTED, ""]
    assert INTERRUPTED in contents[4]
    assert contents[-1] == "root got bg done: worked"
    assert log.read_text() == "work\n"


async def test_a_delegation_nested_past_the_parser_stays_interrupted(tmp_path: Path) -> None:
    # A checkpoint file is hostile input: arguments nested past json's recursion limit
    # under a kept answer's call id raised RecursionError out of recover().
    deep = ToolCall("call_0", "subagent", "[" * 5_000)
    messages = [Message("user", "go"), Message("assistant", "", tool_calls=[WAIT]),
                Message("tool", ANSWER, tool_call_id="call_0"),
                Message("assistant", "", tool_calls=[deep])]
    contents = await _recover(tmp_path, messages)
    assert contents[4] != ANSWER and INTERRUPTED in contents[4]
