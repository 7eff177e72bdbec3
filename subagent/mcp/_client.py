"""One connection to an MCP server on the official ``mcp`` SDK, and what its answers
become: the tool listing (bounded) and a call's result text (bounded).

The SDK's client is anyio-based and runs on trio. Stdio servers run on
:mod:`._stdio` (the SDK's session over a transport that bounds each message); HTTP
servers on the SDK's streamable HTTP client (at most 1 MiB per event, its default) with
:mod:`._http`'s bounded HTTP client (at most 1 MiB per reply, none compressed).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ._config import NAME, McpServer
from ._link import Link
from ._schemarefs import ref_loop

if TYPE_CHECKING:
    import mcp_types
    from mcp import ClientSession

#: The most tools one server may list; the rest are left out (and reported).
MAX_TOOLS = 256
#: The most pages of ``tools/list`` read (a server that pages forever is cut short).
MAX_PAGES = 16
#: The longest tool description kept (characters); longer ones are cut.
MAX_DESCRIPTION = 4096
#: The largest input schema accepted (characters of its JSON); a tool with a larger
#: one is left out.
MAX_SCHEMA = 64 * 1024
#: The most result text a call returns (characters): 1 MiB; the rest is cut and said.
MAX_RESULT = 1024 * 1024
#: The longest server error message kept in an error result.
MAX_ERROR = 1000


@asynccontextmanager
async def connect(server: McpServer, link: Link) -> AsyncIterator[ClientSession]:
    """A session with ``server``, not yet initialized; ``link`` is told when its
    transport ends (a stdio transport's; an HTTP one's never does). A checkpoint.

    Raises:
      ImportError: the ``mcp`` extra is not installed.
      Exception: whatever the transport raises when it cannot connect.
    """
    from mcp import ClientSession

    if server.command is not None:
        from ._stdio import bounded_stdio

        async with (
            bounded_stdio(server, link) as (read, write),
            ClientSession(read, write) as session,
        ):
            yield session
    else:
        assert server.url is not None
        from mcp.client.streamable_http import streamable_http_client

        from ._http import bounded_client

        client = bounded_client(server.headers)
        async with (
            client,
            streamable_http_client(server.url, http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            yield session


async def list_tools(session: ClientSession) -> tuple[dict[str, mcp_types.Tool], list[str]]:
    """The server's tools by name, and what was left out and why. A checkpoint.

    At most :data:`MAX_TOOLS` tools over :data:`MAX_PAGES` pages; a tool whose name a
    model API would refuse, or whose schema is larger than :data:`MAX_SCHEMA` or holds
    ``NaN`` or an infinity (not JSON: a model API refuses the whole request), or
    whose references loop without end (:mod:`._schemarefs`), is left out.
    """
    import mcp_types

    tools: dict[str, mcp_types.Tool] = {}
    problems: list[str] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        for tool in page.tools:
            if len(tools) >= MAX_TOOLS:
                problems.append(f"it lists more than {MAX_TOOLS} tools; the rest are left out")
                return tools, problems
            if not NAME.fullmatch(tool.name):
                problems.append(f"tool {tool.name[:80]!r} is left out: its name is not valid")
            elif problem := _schema_problem(tool.input_schema):
                problems.append(f"tool {tool.name!r} is left out: {problem}")
            else:
                tools[tool.name] = tool
        cursor = page.next_cursor
        if not cursor:
            return tools, problems
    problems.append(f"it pages its tool list past {MAX_PAGES} pages; the rest are left out")
    return tools, problems


def _schema_problem(schema: Mapping[str, Any]) -> str | None:
    # Why a listed input schema cannot go to a model API, if it cannot. The SDK's
    # parser reads NaN, Infinity and -Infinity (and 1e400 as an infinity).
    try:
        text = json.dumps(schema, allow_nan=False)
    except ValueError:
        return "its schema holds NaN or Infinity (not JSON)"
    if len(text) > MAX_SCHEMA:
        return "its schema is too large"
    if (where := ref_loop(schema)) is not None:
        return f"its schema's references loop without end (at {where[:200]!r})"
    return None


def describe_tool(
    server: str, tool: mcp_types.Tool, masked: Callable[[str], str] = str
) -> str:
    """The description a model sees: the server's, through ``masked`` (the server's
    secrets hidden), then cut to :data:`MAX_DESCRIPTION`."""
    text = masked(tool.description or f"The {tool.name} tool of MCP server {server}.")
    return text if len(text) <= MAX_DESCRIPTION else text[:MAX_DESCRIPTION] + " [...]"


def result_text(
    result: mcp_types.CallToolResult, masked: Callable[[str], str] = str
) -> str:
    """A call's result as text: the text content joined by newlines; the structured
    content as JSON when there is no text; images, audio and resources summarised.
    The joined text goes through ``masked`` (the server's secrets hidden, one split
    over two content items too) before it is cut to :data:`MAX_RESULT` characters
    (the cut is said)."""
    import mcp_types

    parts: list[str] = []
    size = 0
    for item in result.content:
        if isinstance(item, mcp_types.TextContent):
            part = item.text
        elif isinstance(item, mcp_types.ImageContent | mcp_types.AudioContent):
            kind = "image" if isinstance(item, mcp_types.ImageContent) else "audio"
            part = f"[{kind}: {item.mime_type[:100]}, {len(item.data) * 3 // 4} bytes]"
        elif isinstance(item, mcp_types.ResourceLink):
            part = f"[resource link: {str(item.uri)[:500]}]"
        elif isinstance(item, mcp_types.EmbeddedResource):
            res = item.resource
            mime = getattr(res, "mime_type", None) or "unknown type"
            part = f"[resource: {str(res.uri)[:500]}, {str(mime)[:100]}]"
        else:
            part = f"[{type(item).__name__} content]"
        parts.append(part)
        size += len(part) + 1
        if size > MAX_RESULT:
            break
    has_text = any(isinstance(i, mcp_types.TextContent) for i in result.content)
    if result.structured_content is not None and not has_text:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = masked("\n".join(parts))
    if len(text) > MAX_RESULT:
        text = (
            text[:MAX_RESULT]
            + f"\n[cut: the result is longer than {MAX_RESULT} characters]"
        )
    return text


def schema_of(tool: mcp_types.Tool, masked: Callable[[str], str] = str) -> Mapping[str, Any]:
    """The tool's input schema (a JSON object schema), every text in it (names and
    values, at any depth: a loop, not a recursion) through ``masked``."""
    root: list[Any] = [dict(tool.input_schema)]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        holder, key = stack.pop()
        item = holder[key]
        if isinstance(item, str):
            holder[key] = masked(item)
        elif isinstance(item, dict):
            copied = {masked(k) if isinstance(k, str) else k: v for k, v in item.items()}
            holder[key] = copied
            stack.extend((copied, k) for k in copied)
        elif isinstance(item, list):
            holder[key] = listed = list(item)
            stack.extend((listed, i) for i in range(len(listed)))
    schema: Mapping[str, Any] = root[0]
    return schema
