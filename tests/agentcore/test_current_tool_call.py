"""agentcore.lowlevel.current_tool_call(): the call whose tool runs in this task, for tools that
start other work (the delegation tool) without reading events."""

from __future__ import annotations

import trio
import trio.testing

from agentcore import Agent, FunctionTool, Message, ToolCall
from agentcore.lowlevel import current_tool_call
from agentcore.testing import ScriptedModel

Clock = trio.testing.MockClock


def seen_by(name: str, seen: list[tuple[str, ToolCall | None]], *, delay: float = 0.0,
            read_only: bool = False) -> FunctionTool:
    async def execute(arguments: str) -> str:
        before = current_tool_call()
        await trio.sleep(delay)  # parallel calls interleave here
        assert current_tool_call() is before
        seen.append((name, before))
        return "ok"

    return FunctionTool(name, name, {"type": "object"}, execute, read_only=read_only)


async def test_each_call_sees_itself_sequential_and_parallel(autojump_clock: Clock) -> None:
    seen: list[tuple[str, ToolCall | None]] = []
    calls = (
        ToolCall("r1", "read", "{}"), ToolCall("r2", "read", "{}"), ToolCall("w1", "write", "{}"),
    )
    model = ScriptedModel([Message("assistant", "", tool_calls=calls), "done"])
    read = seen_by("read", seen, delay=1.0, read_only=True)
    write = seen_by("write", seen)
    result = await Agent(model=model, tools=[read, write]).run("go")
    assert result.output == "done"
    # the two reads ran together (r2 may finish first); each saw its own call
    assert sorted((name, call.id) for name, call in seen if call is not None) == [
        ("read", "r1"), ("read", "r2"), ("write", "w1"),
    ]
    # the call itself (as a CurrentToolCall, with its idempotency key)
    assert {(c.id, c.name, c.arguments) for _, c in seen if c is not None} == {
        (c.id, c.name, c.arguments) for c in calls}
    assert current_tool_call() is None  # outside a tool's execute


async def test_not_set_outside_execute() -> None:
    assert current_tool_call() is None


async def test_a_run_started_inside_a_tool_call_is_in_no_call_until_its_own() -> None:
    # A run started by a tool (an inline subagent) is not in its caller's call: its
    # model sees None, its own tool sees its own call; the caller's call is current
    # again once the inner run has ended.
    seen: list[tuple[str, str | None]] = []

    def note(where: str) -> None:
        call = current_tool_call()
        seen.append((where, call.id if call is not None else None))

    def inner_reply(request: object) -> Message:
        note("inner model")
        if len(seen) == 2:
            return Message("assistant", "", tool_calls=[ToolCall("in-1", "mark", "{}")])
        return Message("assistant", "inner done")

    async def mark(arguments: str) -> str:
        note("inner tool")
        await trio.lowlevel.checkpoint()
        return "marked"

    inner = Agent(model=ScriptedModel(inner_reply),
                  tools=[FunctionTool("mark", "mark", {"type": "object"}, mark)])

    async def delegate(arguments: str) -> str:
        note("outer tool")
        output = (await inner.run("go")).output
        note("outer tool after")
        return output

    outer = Agent(
        model=ScriptedModel([Message("assistant", "", tool_calls=[
            ToolCall("out-1", "delegate", "{}")]), "done"]),
        tools=[FunctionTool("delegate", "delegate", {"type": "object"}, delegate)])
    assert (await outer.run("go")).output == "done"
    assert seen == [("outer tool", "out-1"), ("inner model", None), ("inner tool", "in-1"),
                    ("inner model", None), ("outer tool after", "out-1")]
