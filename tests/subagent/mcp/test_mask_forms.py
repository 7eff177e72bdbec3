"""A server's secret echoed back in any form is masked (issue 33 item 6): JSON
``\\uXXXX`` escapes, URL ``%XX`` escapes (any mix, either case), base64 (standard or
URL-safe, any alignment), and split over two content items."""

from __future__ import annotations

import base64
import re
import urllib.parse

import mcp_types
from hypothesis import given
from hypothesis import strategies as st

from subagent.mcp import McpServer
from subagent.mcp._client import result_text

secrets = st.text(st.characters(codec="utf-8"),
                  min_size=8, max_size=40)
around = st.text(" .:", max_size=5)


def escaped(secret: str, which: list[bool], upper: bool) -> str:
    # Each character as itself, or as a JSON escape (which[i]); hex of either case.
    out = []
    for i, ch in enumerate(secret):
        if which[i % len(which)] and ord(ch) <= 0xFFFF:
            code = f"\\u{ord(ch):04x}"
            out.append(code.upper().replace("\\U", "\\u") if upper else code)
        else:
            out.append(ch)
    return "".join(out)


@given(secrets, around, around, st.lists(st.booleans(), min_size=1, max_size=5),
       st.booleans())
def test_json_escapes_are_masked(secret: str, before: str, after: str, which: list[bool],
                                 upper: bool) -> None:
    server = McpServer("s", command="x", env={"K": secret})
    assert server.masked(before + escaped(secret, which, upper) + after) == \
        before + "***" + after


@given(secrets, around, around, st.booleans())
def test_url_escapes_are_masked(secret: str, before: str, after: str, lower: bool) -> None:
    server = McpServer("s", command="x", env={"K": secret})
    quoted = urllib.parse.quote(secret, safe="")
    if lower:
        quoted = re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quoted)
    assert server.masked(before + quoted + after) == before + "***" + after


@given(secrets, st.binary(max_size=2), st.booleans())
def test_base64_is_masked(secret: str, lead: bytes, urlsafe: bool) -> None:
    server = McpServer("s", command="x", env={"K": secret})
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    text = encode(lead + secret.encode()).decode()
    out = server.masked(text)
    assert "***" in out
    assert text not in out
    # What is left is at most the few characters that the secret shares with what
    # is around it (the alignment and the padding).
    assert len(out) <= 3 + 2 + 4 + 3


@given(secrets, st.data())
def test_a_secret_split_over_two_content_items_is_masked(secret: str,
                                                         data: st.DataObject) -> None:
    cut = data.draw(st.integers(1, len(secret) - 1))
    server = McpServer("s", url="http://127.0.0.1:1/mcp", headers={"Authorization": secret})
    result = mcp_types.CallToolResult(content=[
        mcp_types.TextContent(type="text", text="a " + secret[:cut]),
        mcp_types.TextContent(type="text", text=secret[cut:] + " b")])
    assert result_text(result, server.masked) == "a *** b"
