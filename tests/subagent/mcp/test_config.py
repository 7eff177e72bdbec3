"""MCP declarations (Python and specs files) and what server answers become: pure, no I/O."""

from __future__ import annotations

import json
from typing import Any

import mcp_types
import pytest

from subagent import SpecError, SpecFileError, specs_from_mapping
from subagent.mcp import McpServer
from subagent.mcp._client import MAX_RESULT, result_text


def test_a_server_is_a_command_or_a_url_never_both() -> None:
    assert McpServer("t", command="x").transport == "stdio"
    assert McpServer("t", url="https://h/mcp").transport == "http"
    with pytest.raises(SpecError, match=r"^MCP server 't': give exactly one of command"):
        McpServer("t")
    with pytest.raises(SpecError, match=r"^MCP server 't': give exactly one of command"):
        McpServer("t", command="x", url="http://h")
    with pytest.raises(SpecError, match=r"^MCP server 't': url must start with http"):
        McpServer("t", url="file:///etc/passwd")
    with pytest.raises(SpecError, match=r"^MCP server name 'a b' must be 1 to 64 letters"):
        McpServer("a b", command="x")
    with pytest.raises(SpecError, match=r"^MCP server 't': start_timeout must be a positive"):
        McpServer("t", command="x", start_timeout=0)


def mapping(mcp: Any, tools: list[str]) -> dict[str, Any]:
    return {"mcp": mcp, "agents": {"a": {"model": "scripted:r.json", "tools": tools}}}


def read(data: dict[str, Any]) -> Any:
    return specs_from_mapping(data, resolve_model=lambda text: object())  # type: ignore[arg-type,return-value]


def test_a_specs_file_declares_servers_and_names_their_tools() -> None:
    table = {"command": "srv", "args": ["--x"], "env": {"K": "v"}, "read_only": ["get"],
             "start_timeout": 5}
    specs = read(mapping({"t": table, "h": {"url": "http://127.0.0.1:1/mcp"}},
                         ["mcp:t", "mcp:h/get"]))
    assert specs.mcp == (
        McpServer("t", command="srv", args=("--x",), env={"K": "v"}, read_only=("get",),
                  start_timeout=5.0),
        McpServer("h", url="http://127.0.0.1:1/mcp"),
    )
    assert specs.mcp_tools == {"a": ("t", "h/get")}
    assert specs.specs[0].tools == ()
    with pytest.raises(SpecError, match="agents list MCP tools; pass mcp_tools"):
        specs.specs_for({})
    asked: list[tuple[str, ...]] = []

    def tools(*ref: str, taken: object = ()) -> tuple[Any, ...]:
        asked.append(ref)
        return ()

    specs.specs_for({}, tools)
    assert asked == [("t",), ("h", "get")]


@pytest.mark.parametrize(
    ("mcp", "tools", "message"),
    [
        ({"t": {"command": "x"}}, ["mcp:u/get"],
         "<mapping>: agent 'a' field 'tools': tool 'mcp:u/get' names no [mcp] server; "
         "declared: t"),
        ({"t": {"command": "x", "cwd": "/"}}, [],
         "<mapping>: [mcp.t]: field 'cwd' is unknown; the fields are command, args, env, "
         "url, headers, read_only, start_timeout"),
        ({"t": {"command": ["x"]}}, [], "<mapping>: [mcp.t]: field 'command' must be a string"),
        ({"t": {"url": "http://h", "headers": {"A": 1}}}, [],
         "<mapping>: [mcp.t]: field 'headers' must be a table of strings"),
        ({"t": {}}, [], "<mapping>: [mcp.t]: MCP server 't': give exactly one of command "
         "(stdio) and url (HTTP)"),
        ({"t": "x"}, [], "<mapping>: [mcp.t]: must be a table"),
        ({"a.b": {"command": "x"}}, [], "<mapping>: [mcp] 'a.b': MCP server name 'a.b' must be "
         "1 to 64 letters, digits, '_' or '-'"),
        ("x", [], "<mapping>: [mcp]: must be a table, not a string ('x')"),
    ],
)
def test_a_bad_mcp_declaration_is_a_spec_file_error(mcp: Any, tools: list[str],
                                                    message: str) -> None:
    with pytest.raises(SpecFileError) as info:
        read(mapping(mcp, tools))
    assert str(info.value) == message


def call_result(*content: Any, structured: Any = None, error: bool = False) -> Any:
    return mcp_types.CallToolResult(content=list(content), structured_content=structured,
                                    is_error=error)


def test_results_join_text_summarise_media_and_fall_back_to_structured_json() -> None:
    text = mcp_types.TextContent(type="text", text="one")
    image = mcp_types.ImageContent(type="image", data="QUJD", mime_type="image/png")
    link = mcp_types.ResourceLink(type="resource_link", uri="file:///x", name="x")
    assert result_text(call_result(text, image, link, text)) == (
        "one\n[image: image/png, 3 bytes]\n[resource link: file:///x]\none")
    assert result_text(call_result(structured={"a": [1, "é"]})) == json.dumps(
        {"a": [1, "é"]}, ensure_ascii=False)
    # With text, the structured copy is not repeated.
    assert result_text(call_result(text, structured={"a": 1})) == "one"


def test_a_result_is_cut_at_one_mebibyte_and_says_so() -> None:
    big = mcp_types.TextContent(type="text", text="x" * (MAX_RESULT + 10))
    text = result_text(call_result(big, big))
    assert text == "x" * MAX_RESULT + f"\n[cut: the result is longer than {MAX_RESULT} characters]"


def test_repr_hides_env_and_headers_values() -> None:
    # Issue 33 item 5: the repr printed bearer tokens and env secrets in clear.
    stdio = McpServer("s", command="srv", env={"API_KEY": "sk-live-0123456789"})
    http = McpServer("h", url="http://127.0.0.1:1/mcp",
                     headers={"Authorization": "Bearer tok-0123456789"})
    assert "sk-live-0123456789" not in repr(stdio)
    assert "tok-0123456789" not in repr(http)
    assert "env={'API_KEY': '***'}" in repr(stdio)
    assert "headers={'Authorization': '***'}" in repr(http)
    assert repr(http).startswith("McpServer(name='h', command=None, args=(), env={},")
