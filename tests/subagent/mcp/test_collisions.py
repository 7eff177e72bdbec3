"""Tool names an MCP server shares with an agent's other tools (issue 33 item 5): of
all a server lists, a colliding tool is left out with an ``mcp_server_error`` event; a
collision the specs name explicitly, or a tool a server no longer lists, ends
``subagent run`` with one line and exit 2, not an exception group's traceback. A tool
whose schema's references loop without end is left out too (issue 33 item 6)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from subagent import EventKind, SpecError, Stream, open_pool
from subagent._cli._cli import main
from subagent.mcp import McpServer

HOSTILE = str(Path(__file__).with_name("hostile_stdio.py"))


def listing(name: str, tools: str) -> McpServer:
    return McpServer(name, command=sys.executable, args=(HOSTILE, "names", tools))


def specs(tmp_path: Path, tools: list[str], servers: dict[str, str]) -> Path:
    tables = "".join(
        f"[mcp.{name}]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([HOSTILE, 'names', listed])}\n\n"
        for name, listed in servers.items()
    )
    path = tmp_path / "specs.toml"
    path.write_text(f"{tables}[agents.x]\nmodel = \"scripted:x.json\"\n"
                    f"tools = {json.dumps(tools)}\n")
    (tmp_path / "x.json").write_text(json.dumps([{"content": "ok"}]))
    return path


@pytest.mark.slow
async def test_a_pool_leaves_out_a_taken_name_and_reports_it() -> None:
    stream = Stream(100)
    async with open_pool(events=stream, mcp=[listing("a", "read_file,echo")]) as pool:
        tools = pool.mcp_tools("a", taken={"read_file", "other"})
        assert [t.name for t in tools] == ["echo"]
        assert [t.name for t in pool.mcp_tools("a")] == ["read_file", "echo"]
    stream.close()
    errors = [e.error async for e in stream if e.kind is EventKind.mcp_server_error]
    assert errors == [
        "MCP server 'a' tool 'read_file' is left out: the agent has a tool of that name"]


@pytest.mark.slow
@pytest.mark.parametrize(("tools", "servers", "left_out"), [
    (["read_file", "mcp:a"], {"a": "read_file,echo"}, "MCP server 'a' tool 'read_file'"),
    (["mcp:a", "mcp:b"], {"a": "echo", "b": "echo,subagent"}, "MCP server 'b' tool 'echo'"),
])
def test_subagent_run_leaves_a_colliding_tool_out(
    tools: list[str], servers: dict[str, str], left_out: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    code = main(["run", str(specs(tmp_path, tools, servers)), "--agent", "x", "hi",
                 "--plain", "--ledger", str(tmp_path / "l.jsonl")], out=out)
    assert code == 0, out.getvalue()
    assert f"mcp_server_error: {left_out} is left out: the agent has a tool of that name" \
        in out.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize(("tools", "servers", "line"), [
    (["read_file", "mcp:a/read_file"], {"a": "read_file"},
     "subagent: spec 'x': Agent has two tools named 'read_file'\n"),
    (["mcp:a/echo", "mcp:b/echo"], {"a": "echo", "b": "echo"},
     "subagent: spec 'x': Agent has two tools named 'echo'\n"),
    (["mcp:a/gone"], {"a": "echo"},
     "subagent: MCP server 'a' has no tool 'gone'; its tools: echo\n"),
])
def test_subagent_run_refuses_a_named_collision_in_one_line(
    tools: list[str], servers: dict[str, str], line: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["run", str(specs(tmp_path, tools, servers)), "--agent", "x", "hi",
                 "--plain", "--ledger", str(tmp_path / "l.jsonl")], out=io.StringIO())
    assert code == 2
    assert capsys.readouterr().err == line


@pytest.mark.slow
async def test_a_tool_whose_schema_references_loop_is_left_out() -> None:
    # Issue 33 item 6: a $ref loop behind a property loaded (refs may not loop).
    stream = Stream(100)
    server = McpServer("a", command=sys.executable, args=(HOSTILE, "refloop"))
    async with open_pool(events=stream, mcp=[server]) as pool:
        assert [t.name for t in pool.mcp_tools("a")] == ["tree", "echo"]
        with pytest.raises(SpecError, match=r"^MCP server 'a' has no tool 'loop'; its tools: "
                           r"echo, tree$"):
            pool.mcp_tools("a", "loop")
    stream.close()
    errors = [e.error async for e in stream if e.kind is EventKind.mcp_server_error]
    assert errors == ["MCP server 'a' tool 'loop' is left out: its schema's references loop "
                      "without end (at '/$defs/y')"]
