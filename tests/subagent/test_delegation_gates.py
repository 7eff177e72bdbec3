"""Delegation cannot widen permission (issue 13 item 5): gates compose down the tree,
and ``Spec.delegates_to`` limits whom a run may delegate to."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from agentcore import (
    Agent,
    AllOf,
    EventKind,
    GateDecision,
    GateRequest,
    Message,
    ModelRequest,
    ToolGate,
    allow_all,
    deny_all,
    read_only,
)
from agentcore.testing import RecordingTool, ScriptedModel, tool_call_reply
from ledger import MemorySink
from subagent import Spec, Stream, SubagentResultsTool, SubagentTool, open_pool
from subagent._specs._file import SpecFileError, specs_from_mapping
from subagent.testing import delegate_reply

from .helpers import drain

Clock = trio.testing.MockClock

WRITE_DENIED = "tool 'write' may change things and only read-only tools are allowed"


async def read_or_delegate(request: GateRequest) -> GateDecision:
    """A read-only parent's gate: read-only tools and delegation."""
    if request.tool.name == "subagent":
        await trio.lowlevel.checkpoint()
        return GateDecision(True, "delegation")
    return await read_only(request)


def writer_spec(write: RecordingTool, **fields: Any) -> Spec:
    model = ScriptedModel([tool_call_reply("write", '{"path": "x"}', id="w1"), "wrote"])
    return Spec("writer", model=model, tools=[write], gate=allow_all, **fields)


def tool_results(messages: list[Message] | tuple[Message, ...]) -> list[str]:
    return [m.content for m in messages if m.role == "tool"]


async def test_a_read_only_parent_cannot_launder_writes_through_a_permissive_child(
    autojump_clock: Clock,
) -> None:
    write = RecordingTool("write")
    stream = Stream(1000)
    sink = MemorySink()
    async with open_pool(events=stream) as pool:
        pool.register(writer_spec(write, audit=sink))
        planner = ScriptedModel([delegate_reply("writer", "write it", id="d1"), "planned"])
        pool.register(Spec("planner", model=planner, tools=[SubagentTool(pool)],
                           gate=read_or_delegate))
        result = await (await pool.submit("planner", "go")).wait()
    stream.close()
    events = await drain(stream)
    assert write.calls == []
    assert result.output == "planned"
    child = ("planner/0001", "writer/0002")
    reason = f"the gate of planner/0001: {WRITE_DENIED}"
    decisions = [e.event for e in events if e.path == child
                 and e.kind is EventKind.gate_decision]
    assert [d.decision for d in decisions if d is not None] == [GateDecision(False, reason)]
    entry = next(e for e in sink.entries if e.kind == "gate_decision")
    assert (entry.path, entry.verdict, entry.reason) == (child, "deny", reason)
    output = json.loads(tool_results(planner.requests[1].messages)[0])
    assert output == {"agent": "writer", "path": list(child), "output": "wrote"}


async def test_a_root_task_submitted_directly_keeps_its_own_gate(autojump_clock: Clock) -> None:
    write = RecordingTool("write")
    async with open_pool() as pool:
        pool.register(writer_spec(write))
        task = await pool.submit("writer", "write it")
        await task.wait()
    assert write.calls == ['{"path": "x"}']
    assert task.spec.gate is allow_all


async def test_a_background_child_is_bounded_by_its_parents_gate(autojump_clock: Clock) -> None:
    write = RecordingTool("write")
    async with open_pool() as pool:
        pool.register(writer_spec(write))
        call = tool_call_reply(
            "subagent", json.dumps({"agent": "writer", "task": "t", "wait": False}), id="d1"
        )
        wait = tool_call_reply("subagent_results", "{}", id="r1")
        planner = ScriptedModel([call, wait, "planned"])
        pool.register(Spec("planner", model=planner,
                           tools=[SubagentTool(pool), SubagentResultsTool(pool)],
                           gate=read_or_delegate))
        task = await pool.submit("planner", "go")
        await task.wait()
    assert write.calls == []
    child = task.children[0]
    assert isinstance(child.spec.gate, AllOf)
    assert child.spec.gate.gates == (("planner/0001", read_or_delegate), ("", allow_all))


async def test_a_run_outside_the_pool_bounds_its_subagents_too(autojump_clock: Clock) -> None:
    write = RecordingTool("write")
    async with open_pool() as pool:
        pool.register(writer_spec(write))
        outer = Agent(
            model=ScriptedModel([delegate_reply("writer", "t", id="d1"), "ok"]),
            tools=[SubagentTool(pool)],
            gate=read_or_delegate,
        )
        result = await outer.run("go", path=("app",))
    assert write.calls == []
    assert json.loads(tool_results(result.messages)[0])["output"] == "wrote"


async def test_grandchildren_are_bounded_by_every_ancestor(autojump_clock: Clock) -> None:
    write = RecordingTool("write")
    async with open_pool() as pool:
        tool = SubagentTool(pool)
        pool.register(writer_spec(write))
        pool.register(Spec("mid", model=ScriptedModel([delegate_reply("writer", "t"), "m"]),
                           tools=[tool], gate=allow_all))
        pool.register(Spec("top", model=ScriptedModel([delegate_reply("mid", "t"), "t"]),
                           tools=[tool], gate=read_or_delegate))
        top = await pool.submit("top", "go")
        await top.wait()
    assert write.calls == []
    grandchild = top.children[0].children[0]
    assert isinstance(grandchild.spec.gate, AllOf)
    # the writer's own gate is mid's allow_all: asked once, as the writer's own
    assert grandchild.spec.gate.gates == (("top/0001", read_or_delegate), ("", allow_all))


# -- delegates_to --------------------------------------------------------------------


def offered_agents(request: ModelRequest) -> list[str] | None:
    for spec in request.tools:
        if spec.name == "subagent":
            enum: list[str] = spec.parameters["properties"]["agent"]["enum"]
            return enum
    return None


async def test_delegates_to_limits_the_enum_and_what_the_tool_accepts(
    autojump_clock: Clock,
) -> None:
    async with open_pool() as pool:
        tool = SubagentTool(pool)
        for name in "ab":
            pool.register(Spec(name, description=f"agent {name}",
                               model=ScriptedModel([f"{name} done"])))
        boss = ScriptedModel([
            delegate_reply("b", "t", id="d1"),
            tool_call_reply("subagent", json.dumps({"agent": "b", "task": "t", "wait": False}),
                            id="d2"),
            delegate_reply("a", "t", id="d3"),
            "done",
        ])
        pool.register(Spec("boss", model=boss, tools=[tool], delegates_to=("a",)))
        task = await pool.submit("boss", "go")
        await task.wait()
    assert offered_agents(boss.requests[0]) == ["a"]
    description = boss.requests[0].tools[0].parameters["properties"]["agent"]["description"]
    assert description == "The subagent to run. Agents: a: agent a"
    refused = (
        "tool 'subagent' failed: InvalidArgumentsError: invalid arguments for the subagent "
        "tool: 'agent' must be one of the agents this run may delegate to ('a'), not 'b'"
    )
    results = tool_results(boss.requests[3].messages)
    assert results[:2] == [refused, refused]
    assert json.loads(results[2])["output"] == "a done"
    assert [child.name for child in task.children] == ["a"]
    # The shared tool itself is not narrowed: another spec sees every agent.
    assert tool.offered() == ["a", "b", "boss"]


async def test_delegates_to_nothing_offers_no_delegation_tool(autojump_clock: Clock) -> None:
    async with open_pool() as pool:
        pool.register(Spec("a", model=ScriptedModel(["a"])))
        loner = ScriptedModel(["alone"])
        pool.register(Spec("loner", model=loner, tools=[SubagentTool(pool)], delegates_to=()))
        pool.register(Spec("ghost", model=ScriptedModel(["g"]), tools=[SubagentTool(pool)],
                           delegates_to=("unregistered",)))
        await (await pool.submit("loner", "go")).wait()
        ghost = pool.specs["ghost"].model
        await (await pool.submit("ghost", "go")).wait()
    assert loner.requests[0].tools == ()
    assert isinstance(ghost, ScriptedModel)
    assert ghost.requests[0].tools == ()


async def test_a_tool_limited_by_its_constructor(autojump_clock: Clock) -> None:
    async with open_pool() as pool:
        for name in "abc":
            pool.register(Spec(name, model=ScriptedModel([name])))
        tool = SubagentTool(pool, agents=["b", "c"])
        assert tool.parameters["properties"]["agent"]["enum"] == ["b", "c"]
        assert tool.limited(["a", "b"]).offered() == ["b"]
        assert repr(tool) == "<subagent.SubagentTool agents=['b', 'c']>"
        outer = Agent(model=ScriptedModel([delegate_reply("a", "t"), "ok"]), tools=[tool])
        result = await outer.run("go")
    assert tool_results(result.messages) == [
        "tool 'subagent' failed: InvalidArgumentsError: invalid arguments for the subagent "
        "tool: 'agent' must be one of the agents this run may delegate to ('b', 'c'), not 'a'"
    ]
    assert pool.statistics().accepted == 0


# -- any tree of gates: a call runs iff every gate on its path allows it --------------

GATES: dict[str, ToolGate | None] = {
    "none": None, "allow": allow_all, "deny": deny_all, "read_only": read_only,
}


def lets_through(kind: str, tool_read_only: bool) -> bool:
    return kind in ("none", "allow") or (kind == "read_only" and tool_read_only)


def with_delegation(gate: ToolGate | None) -> ToolGate | None:
    # Every level may delegate, so the tree is reached whatever the gates say about
    # the other tools.
    if gate is None:
        return None

    async def gated(request: GateRequest) -> GateDecision:
        if request.tool.name == "subagent":
            await trio.lowlevel.checkpoint()
            return GateDecision(True, "delegation")
        return await gate(request)

    return gated


@st.composite
def trees(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    children = draw(st.lists(trees(depth + 1), max_size=2)) if depth < 2 else []
    return {
        "gate": draw(st.sampled_from(sorted(GATES))),
        "read_only": draw(st.booleans()),
        "children": children,
    }


@pytest.mark.slow
@given(trees(), st.booleans())
def test_a_call_runs_iff_every_gate_on_its_path_allows_it(
    tree: dict[str, Any], share_gates: bool
) -> None:
    nodes: list[tuple[dict[str, Any], tuple[str, ...]]] = []

    def walk(node: dict[str, Any], kinds: tuple[str, ...]) -> None:
        node["name"] = f"n{len(nodes)}"
        kinds = (*kinds, node["gate"])
        nodes.append((node, kinds))
        for child in node["children"]:
            walk(child, kinds)

    walk(tree, ())
    shared = {kind: with_delegation(gate) for kind, gate in GATES.items()}

    async def main() -> None:
        async with open_pool(max_depth=4) as pool:
            delegate = SubagentTool(pool)
            tools: dict[str, RecordingTool] = {}
            for node, _ in nodes:
                name = node["name"]
                tools[name] = RecordingTool(f"act_{name}", read_only=node["read_only"])
                script = [tool_call_reply(f"act_{name}", id=f"{name}-act")]
                script += [delegate_reply(c["name"], "t") for c in node["children"]]
                gate = (shared[node["gate"]] if share_gates
                        else with_delegation(GATES[node["gate"]]))
                pool.register(Spec(name, model=ScriptedModel([*script, "done"]),
                                   tools=[tools[name], delegate], gate=gate))
            await (await pool.submit(tree["name"], "go")).wait()
        for node, kinds in nodes:
            ran = tools[node["name"]].calls == ["{}"]
            assert ran == all(lets_through(k, node["read_only"]) for k in kinds), (node, kinds)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_specs_files_accept_delegates_to() -> None:
    specs = specs_from_mapping(
        {"agents": {"boss": {"model": "scripted:x", "delegates_to": ["a", "b"]},
                    "a": {"model": "scripted:x"}}},
        resolve_model=lambda text: ScriptedModel(["ok"]),
    )
    assert [spec.delegates_to for spec in specs.specs] == [("a", "b"), None]
    with pytest.raises(SpecFileError) as info:
        specs_from_mapping(
            {"agents": {"boss": {"model": "scripted:x", "delegates_to": "a"}}},
            resolve_model=lambda text: ScriptedModel(["ok"]),
        )
    assert str(info.value) == (
        "<mapping>: agent 'boss' field 'delegates_to': must be a list of agent names, "
        "not a string ('a')"
    )


async def test_an_ancestor_gate_that_raises_or_hangs_denies_naming_it(
    autojump_clock: Clock,
) -> None:
    async def fragile(request: GateRequest) -> GateDecision:
        if request.tool.name == "subagent":
            return GateDecision(True, "delegation")
        if request.call.id == "w1":
            await trio.sleep_forever()
        raise LookupError("no policy for this tool")

    write = RecordingTool("write")
    async with open_pool() as pool:
        child = ScriptedModel([
            tool_call_reply("write", '{"path": "x"}', id="w1"),
            tool_call_reply("write", '{"path": "y"}', id="w2"),
            "wrote",
        ])
        pool.register(Spec("writer", model=child, tools=[write], gate=allow_all))
        planner = ScriptedModel([delegate_reply("writer", "t"), "planned"])
        pool.register(Spec("planner", model=planner, tools=[SubagentTool(pool)], gate=fragile))
        await (await pool.submit("planner", "go")).wait()
    assert write.calls == []
    assert tool_results(child.requests[2].messages) == [
        "denied: the gate of planner/0001 did not decide within 120s",
        "denied: the gate of planner/0001 failed: LookupError: no policy for this tool",
    ]
    assert trio.current_time() == 120.0
