"""Review 6's holes in the MCP client, against a real hostile stdio server
(hostile_stdio.py, a subprocess): a stdio server's configured ``env`` values (its
credentials, as an HTTP server's are its headers) echoed in a refused call or a result
reach the model only masked."""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subagent import open_pool
from subagent.mcp import McpServer, McpServerError
from subagent.mcp._stderr import MAX_STDERR, StderrTail

from .hostile_stdio import SECRET
from .test_attack_review5 import HOSTILE, first_start


async def test_an_env_value_echoed_by_a_stdio_server_is_masked() -> None:
    server = McpServer("h", command=sys.executable, args=(HOSTILE, "echo-env"),
                       env={"API_KEY": SECRET, "MODE": "short"})
    async with open_pool(mcp=[server]) as pool:
        [echo] = pool.mcp_tools("h", "echo")
        assert await echo.execute('{"text": "x"}') == "key is ***"
        with pytest.raises(McpServerError) as info:
            await echo.execute('{"refuse": true}')
    assert str(info.value) == "MCP server 'h' refused the call: bad key ***"
    assert server.masked(f"{SECRET} short") == "*** short"


async def test_a_secret_cut_by_the_stderr_window_is_not_shown_in_part() -> None:
    # The 8 KiB kept end of stderr starts inside the secret; what follows it is a path
    # that a report cuts to its last part, so the report reaches back to the cut.
    server = McpServer("h", command=sys.executable, args=(HOSTILE, "stderr-edge"),
                       env={"API_KEY": SECRET})
    up, errors, _ = await first_start(server)
    assert not up
    problem, shown = errors[0].split("; its stderr ends: ")
    assert problem == "MCP server 'h' failed: closed the connection"
    assert shown == "……/srv.py"
    assert not any(SECRET[k:] in errors[0] for k in range(len(SECRET) - 3))


# Random tokens, modelled without repeated characters: a self-overlapping value
# ("00000000") cut by the window cannot be told from text around it.
_SECRETS = st.lists(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789éü€"), min_size=8,
                    max_size=36, unique=True).map("".join)
_FILLER = st.text("abc /\n", max_size=300)


@given(secret=_SECRETS, before=st.integers(0, MAX_STDERR), after=_FILLER,
       cut=st.integers(0, 80), chunk=st.integers(64, 9000))
@settings(max_examples=300, deadline=None)
def test_no_part_of_a_secret_is_shown_wherever_the_window_cuts(
    secret: str, before: int, after: str, cut: int, chunk: int
) -> None:
    # The kept window starts ``cut`` bytes before the secret's end (inside it when
    # ``cut`` < its length), then comes a path a report cuts to its last part; whatever
    # the bytes around it and however they arrive, what a report shows holds no run of
    # three or more of the secret's characters (the filler has none).
    tail = StderrTail(McpServer("h", command="x", env={"K": secret}))
    rest = max(MAX_STDERR - cut - len(after) - 3, 0)
    data = ("a" * before + secret + " /" + "d/" * (rest // 2) + "x" * (1 + rest % 2)
            + after).encode()
    for at in range(0, len(data), chunk):
        tail.feed(data[at:at + chunk])
    shown = tail.shown()
    assert not re.search("[A-Z0-9éü€\ufffd]{3}", shown), shown


@pytest.mark.parametrize(("written", "shown"), [
    ("at file:///home/someone/p/x.py", "at file://…/x.py"),
    ("key:/home/someone/y", "key:…/y"),
    ("PATH:/usr/bin:/home/someone/bin", "PATH:…/bin"),
    ("C:/Users/someone/x", "C:…/x"),
    ("cwd=/home/someone/proj/x", "cwd=…/x"),
    ("see https://h:80/a/b/c and http://h/a/b", "see https://h:80/a/b/c and http://h/a/b"),
    ("~/proj/a/b", "~/proj/a/b"),
])
def test_host_paths_after_a_colon_or_in_a_file_url_are_cut(written: str, shown: str) -> None:
    tail = StderrTail(McpServer("h", command="x"))
    tail.feed(written.encode())
    assert tail.shown() == shown
