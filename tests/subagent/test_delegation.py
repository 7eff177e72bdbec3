"""The delegation tool (SPEC 3.4): nesting without deadlock, paths, depth, error results."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from agentcore import (
    Agent,
    FunctionTool,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    Tool,
    ToolCall,
)
from agentcore.lowlevel import current_tool_call
from agentcore.testing import Blocked, ScriptedModel, tool_call_reply
from ledger import MemorySink
from subagent import (
    Defaults,
    InvalidArgumentsError,
    Spec,
    Stream,
    SubagentResultsTool,
    SubagentTool,
    TaskCancelled,
    TaskStatus,
    TaskTimeout,
    open_pool,
)
from subagent._delegation._tool import parse_arguments

from .helpers import drain, kinds

Clock = trio.testing.MockClock


class ChainModel:
    """Delegates to the next agent of ``chain`` when offered the tool, else answers.

    Records the peak number of model calls running at once and the tools offered."""

    def __init__(self, chain: dict[str, str], delay: float = 1.0) -> None:
        self.chain = chain
        self.delay = delay
        self.active = 0
        self.max_active = 0
        self.offered: dict[str, list[str]] = {}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        me = request.messages[1].content
        self.offered[me] = [t.name for t in request.tools]
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await trio.sleep(self.delay)
        finally:
            self.active -= 1
        last = request.messages[-1]
        if last.role == "tool":
            return ModelResponse(Message("assistant", f"{me} got {last.content}"))
        if "subagent" in self.offered[me] and me in self.chain:
            nxt = self.chain[me]
            call = json.dumps({"agent": nxt, "task": nxt})
            return ModelResponse(tool_call_reply("subagent", call, id=f"call-{me}"))
        return ModelResponse(Message("assistant", f"leaf {me}"))


def register_chain(pool: object, model: ChainModel, names: str) -> SubagentTool:
    from subagent import Pool

    assert isinstance(pool, Pool)
    tool = SubagentTool(pool)
    for name in names:
        pool.register(Spec(name, description=f"agent {name}", model=model, tools=[tool]))
    return tool


async def test_chain_with_one_slot_completes(autojump_clock: Clock) -> None:
    model = ChainModel({"a": "b", "b": "c", "c": "d"})
    stream = Stream(1000)
    async with open_pool(max_concurrent=1, max_depth=4, events=stream) as pool:
        register_chain(pool, model, "abcd")
        result = await (await pool.submit("a", "a")).wait()
    stream.close()
    events = await drain(stream)
    assert model.max_active == 1
    assert trio.current_time() == 7.0
    d = {"agent": "d", "path": ["a/0001", "b/0002", "c/0003", "d/0004"], "output": "leaf d"}
    c = {"agent": "c", "path": ["a/0001", "b/0002", "c/0003"], "output": f"c got {json.dumps(d)}"}
    b = {"agent": "b", "path": ["a/0001", "b/0002"], "output": f"b got {json.dumps(c)}"}
    assert result.output == f"a got {json.dumps(b)}"
    assert {e.path for e in events} == {
        ("a/0001",),
        ("a/0001", "b/0002"),
        ("a/0001", "b/0002", "c/0003"),
        ("a/0001", "b/0002", "c/0003", "d/0004"),
    }
    assert {(e.path[-1], e.call_id) for e in events} == {
        ("a/0001", None), ("b/0002", "call-a"), ("c/0003", "call-b"), ("d/0004", "call-c"),
    }
    assert kinds(events, ("a/0001",)) == [
        "task_queued", "task_started", "agent_start",
        "turn_start", "model_request", "model_response",
        "tool_start", "gate_decision", "tool_end",
        "turn_start", "model_request", "model_response",
        "agent_end", "task_finished",
    ]
    assert pool.statistics().finished == 4


async def test_tool_absent_at_the_depth_limit() -> None:
    model = ChainModel({"a": "b", "b": "c", "c": "d"}, delay=0)
    async with open_pool(max_depth=2) as pool:
        register_chain(pool, model, "abcd")
        result = await (await pool.submit("a", "a")).wait()
    assert model.offered == {"a": ["subagent"], "b": []}
    assert json.loads(result.output.removeprefix("a got ")) == {
        "agent": "b", "path": ["a/0001", "b/0002"], "output": "leaf b",
    }


async def test_depth_enforced_through_the_tool_from_an_outside_run() -> None:
    async with open_pool(max_depth=2) as pool:
        tool = SubagentTool(pool)
        pool.register(Spec("w", model=ScriptedModel(["never"])))
        outer = Agent(
            model=ScriptedModel([tool_call_reply("subagent", '{"agent": "w", "task": "t"}'), "ok"]),
            tools=[tool],
        )
        result = await outer.run("go", path=("x/0001", "y/0002"))
    assert result.messages[-2].content == (
        "tool 'subagent' failed: MaxDepthError: cannot run agent 'w' under x/0001/y/0002: "
        "that would be depth 3, and the pool's max_depth is 2"
    )
    assert pool.statistics().accepted == 0


async def test_outside_run_path_is_the_parent_path() -> None:
    stream = Stream(100)
    async with open_pool(events=stream) as pool:
        tool = SubagentTool(pool)
        pool.register(Spec("w", model=ScriptedModel(["child answer"])))
        outer = Agent(
            model=ScriptedModel([tool_call_reply("subagent", '{"agent": "w", "task": "t"}'), "ok"]),
            tools=[tool],
        )
        result = await outer.run("go", path=("root/0007",))
    stream.close()
    assert json.loads(result.messages[-2].content) == {
        "agent": "w", "path": ["root/0007", "w/0001"], "output": "child answer",
    }
    assert {e.path for e in await drain(stream)} == {("root/0007", "w/0001")}


async def test_unknown_agent_through_the_tool_is_an_error_result() -> None:
    model = ScriptedModel([tool_call_reply("subagent", '{"agent": "zzz", "task": "t"}'), "ok"])
    async with open_pool() as pool:
        tool = SubagentTool(pool)
        pool.register(Spec("b", model=ScriptedModel(["x"])))
        pool.register(Spec("a", model=model, tools=[tool]))
        result = await (await pool.submit("a", "go")).wait()
    assert result.output == "ok"
    assert model.requests[1].messages[-1] == Message(
        "tool",
        "tool 'subagent' failed: UnknownAgentError: unknown agent 'zzz'; "
        "registered agents: a, b",
        tool_call_id=model.requests[1].messages[-2].tool_calls[0].id,
        is_error=True,
    )
    assert pool.statistics().accepted == 1


async def test_failed_child_is_an_error_result() -> None:
    model = ScriptedModel([tool_call_reply("subagent", '{"agent": "b", "task": "t"}'), "ok"])
    async with open_pool() as pool:
        tool = SubagentTool(pool)
        pool.register(Spec("b", model=ScriptedModel([ModelError("no tokens left")])))
        pool.register(Spec("a", model=model, tools=[tool]))
        result = await (await pool.submit("a", "go")).wait()
    assert result.output == "ok"
    assert model.requests[1].messages[-1].content == (
        "tool 'subagent' failed: TaskFailed: task a/0001/b/0002 failed: "
        "ModelError: no tokens left"
    )
    stats = pool.statistics()
    assert (stats.finished, stats.failed) == (1, 1)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("[1]", "expected a JSON object, not list"),
        ("nope", "not JSON (Expecting value: line 1 column 1 (char 0))"),
        ('{"agent": "a"}', "missing required argument 'task'"),
        ('{"task": "t"}', "missing required argument 'agent'"),
        ('{"agent": 1, "task": "t"}', "'agent' must be a string, not int"),
        ('{"agent": "a", "task": "  "}', "'task' must not be empty"),
        ('{"agent": "a", "task": "t", "wait": 0}', "'wait' must be true or false, not int"),
        (
            '{"agent": "a", "task": "t", "x": 1}',
            "unknown argument 'x'; the arguments are 'agent', 'task' and 'wait'",
        ),
    ],
)
def test_arguments_are_validated(arguments: str, message: str) -> None:
    with pytest.raises(InvalidArgumentsError) as info:
        parse_arguments(arguments)
    assert str(info.value) == f"invalid arguments for the subagent tool: {message}"


async def test_schema_lists_the_agents() -> None:
    async with open_pool(defaults=Defaults(model=ScriptedModel([]))) as pool:
        tool = SubagentTool(pool)
        pool.register(Spec("web", description="Searches the web."))
        pool.register(Spec("calc"))
        assert tool.name == "subagent"
        assert tool.read_only is False
        assert str(tool.liveness) == "self_monitoring"
        assert tool.parameters == {
            "type": "object",
            "properties": {
                "agent": {
                    "type": "string",
                    "enum": ["calc", "web"],
                    "description": "The subagent to run. Agents: calc; web: Searches the web.",
                },
                "task": {
                    "type": "string",
                    "description": "The complete task for the subagent, verbatim.",
                },
                "wait": {
                    "type": "boolean",
                    "description": "false: start it in the background; its result arrives "
                    "later as a message (default true: wait for it).",
                },
            },
            "required": ["agent", "task"],
            "additionalProperties": False,
        }
        assert repr(tool) == "<subagent.SubagentTool agents=['calc', 'web']>"


async def test_cancel_cascades_to_descendants_not_siblings(autojump_clock: Clock) -> None:
    leaf = ScriptedModel([Blocked("leaf")] * 2)
    stream = Stream(1000)
    async with open_pool(max_concurrent=2, events=stream) as pool:
        tool = SubagentTool(pool)
        pool.register(Spec("leaf", model=leaf))
        pool.register(Spec("mid", model=ScriptedModel(
            lambda r: "m" if r.messages[-1].role == "tool"
            else tool_call_reply("subagent", '{"agent": "leaf", "task": "t"}')
        ), tools=[tool]))
        first = await pool.submit("mid", "1")
        second = await pool.submit("mid", "2")
        await trio.testing.wait_all_tasks_blocked()
        assert leaf.blocked == 2
        grandchildren = [t for t in pool._live.values() if len(t.path) == 2]
        assert [t.path for t in grandchildren] == [
            ("mid/0001", "leaf/0003"), ("mid/0002", "leaf/0004"),
        ]
        first.cancel()
        with pytest.raises(TaskCancelled):
            await first.wait()
        assert grandchildren[0].status is TaskStatus.cancelled
        assert grandchildren[0].done
        assert grandchildren[1].status is TaskStatus.running
        leaf.release()
        assert (await second.wait()).output == "m"
    stream.close()
    assert kinds(await drain(stream), ("mid/0001", "leaf/0003"))[-2:] == [
        "agent_end", "task_cancelled",
    ]
    stats = pool.statistics()
    assert (stats.finished, stats.cancelled) == (2, 2)


async def test_timed_out_parent_cancels_its_child(autojump_clock: Clock) -> None:
    async with open_pool() as pool:
        tool = SubagentTool(pool)
        child = ScriptedModel([Blocked("never")])
        pool.register(Spec("c", model=child))
        pool.register(Spec("p", model=ScriptedModel(
            [tool_call_reply("subagent", '{"agent": "c", "task": "t"}')]
        ), tools=[tool], timeout=20))
        parent = await pool.submit("p", "go")
        with pytest.raises(TaskTimeout, match=r"^task p/0001 timed out after 20s$"):
            await parent.wait()
        assert trio.current_time() == 20.0
        [kid] = parent.children
        assert kid.status is TaskStatus.cancelled and kid.done


async def test_children_of_accepted_work_may_delegate_after_close() -> None:
    async with open_pool() as pool:
        tool = SubagentTool(pool)
        gate = trio.Event()

        async def parent_script(request: ModelRequest) -> Message | str:
            if request.messages[-1].role == "tool":
                return request.messages[-1].content
            await gate.wait()
            return tool_call_reply("subagent", '{"agent": "c", "task": "t"}')

        pool.register(Spec("c", model=ScriptedModel(["child"])))
        pool.register(Spec("p", model=ScriptedModel(parent_script), tools=[tool]))
        parent = await pool.submit("p", "go")
        await trio.testing.wait_all_tasks_blocked()
        pool.close()
        gate.set()
        result = await parent.wait()
    assert json.loads(result.output)["output"] == "child"


async def test_lifecycle_is_audited_with_the_path() -> None:
    audit = MemorySink()
    async with open_pool(defaults=Defaults(model=ScriptedModel(["hi"]), audit=audit)) as pool:
        pool.register(Spec("a"))
        await (await pool.submit("a", "go")).wait()
    lifecycle = [(str(e.kind), e.path, e.agent_id) for e in audit.entries
                 if e.kind.startswith("task_")]
    assert lifecycle == [
        ("task_queued", ("a/0001",), "a"),
        ("task_started", ("a/0001",), "a"),
        ("task_finished", ("a/0001",), "a"),
    ]
    assert [str(e.kind) for e in audit.entries] == [
        "task_queued", "task_started", "prompt", "model_response", "run_end", "task_finished",
    ]
    assert all(e.run_id == "a/0001" for e in audit.entries)
    assert audit.entries[-1].data == {"agent": "a", "end_reason": "stop"}


async def test_returning_parent_goes_before_queued_work(autojump_clock: Clock) -> None:
    order: list[str] = []

    async def script(request: ModelRequest) -> Message | str:
        me = request.messages[1].content
        order.append(me)
        await trio.sleep(1)
        if me == "p" and request.messages[-1].role != "tool":
            return tool_call_reply("subagent", '{"agent": "w", "task": "c"}')
        return f"{me} done"

    async with open_pool(max_concurrent=1) as pool:
        pool.register(Spec("w", model=ScriptedModel(script), tools=[SubagentTool(pool)]))
        parent = await pool.submit("w", "p")
        await trio.sleep(1.5)
        assert order == ["p", "c"]
        later = await pool.submit("w", "q")
    assert order == ["p", "c", "p", "q"]
    assert trio.current_time() == 4.0
    assert parent.status is later.status is TaskStatus.finished


async def test_child_events_follow_the_parent_stream() -> None:
    own, pool_stream = Stream(100), Stream(100)
    async with open_pool(events=pool_stream) as pool:
        tool = SubagentTool(pool)
        pool.register(Spec("c", model=ScriptedModel(["child"])))
        pool.register(Spec("p", model=ScriptedModel(
            [tool_call_reply("subagent", '{"agent": "c", "task": "t"}', id="x1"), "ok"]
        ), tools=[tool]))
        await (await pool.submit("p", "go", events=own)).wait()
    own.close()
    pool_stream.close()
    events = await drain(own)
    assert {(e.path, e.call_id) for e in events} == {
        (("p/0001",), None), (("p/0001", "c/0002"), "x1"),
    }
    assert await drain(pool_stream) == []


@pytest.mark.parametrize("wait", [True, False])
async def test_a_delegated_child_sees_its_own_tool_call_never_its_parents(
    wait: bool,
) -> None:
    # agentcore.lowlevel.current_tool_call() in a child run started by its parent's
    # delegation call: None outside the child's own calls (its model), its own call in
    # its tool; never the parent's "subagent" call.
    seen: list[tuple[str, str | None]] = []

    def note(where: str) -> None:
        call = current_tool_call()
        seen.append((where, call.id if call is not None else None))

    def parent(request: ModelRequest) -> Message:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n == 0:
            args = json.dumps({"agent": "child", "task": "t", "wait": wait})
            return Message("assistant", "", tool_calls=[ToolCall("p-1", "subagent", args)])
        if n == 1 and not wait:
            return Message("assistant", "", tool_calls=[
                ToolCall("p-2", "subagent_results", "{}")])
        return Message("assistant", "parent done")

    def child(request: ModelRequest) -> Message:
        note("child model")
        if not any(m.role == "assistant" for m in request.messages):
            return Message("assistant", "", tool_calls=[ToolCall("c-1", "mark", "{}")])
        return Message("assistant", "child done")

    async def mark(arguments: str) -> str:
        note("child tool")
        await trio.lowlevel.checkpoint()
        return "marked"

    async with open_pool() as pool:
        tools: list[Tool] = [SubagentTool(pool), SubagentResultsTool(pool),
                 FunctionTool("mark", "mark", {"type": "object"}, mark)]
        pool.register(Spec("parent", model=ScriptedModel(parent), tools=tools))
        pool.register(Spec("child", model=ScriptedModel(child), tools=tools))
        assert (await (await pool.submit("parent", "go")).wait()).output == "parent done"
    assert seen == [("child model", None), ("child tool", "c-1"), ("child model", None)]
