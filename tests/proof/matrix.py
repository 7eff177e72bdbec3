"""The peer fault matrix (issue 33): every outside party the pool talks to, every way
it can fail, at every moment. ``X`` is a cell the tests run; a letter is a cell that
does not apply, for the reason its footnote gives. The tests are parametrized from
these grids, and ``test_the_matrix_is_complete`` checks the counts, so a cell cannot
be dropped silently.
"""

from __future__ import annotations

PEERS = ("openai", "anthropic", "mcp_stdio", "mcp_http", "mcp_client", "jsonl_sink",
         "sqlite_sink", "checkpoints", "temporal")
FAULTS = ("killed_mid_call", "killed_between_calls", "hangs", "drips", "garbage",
          "oversized", "closes_early", "comes_back")
MOMENTS = ("starting", "idle", "mid_call", "cancel", "close")

#: Why a cell does not apply, by footnote letter.
REASONS = {
    "b": "between calls is the idle moment by definition",
    "c": "the call ends by itself at once (an error): no window for a cancel or a close",
    "d": "a model adapter opens a connection per call: there is no start and no idle "
         "connection; a fault at the first call is the mid-call cell",
    "e": "a killed peer leaves nothing to wait for: a cancel or close after the reset "
         "meets no peer (the cells of hangs cover a call blocked on the peer)",
    "f": "an MCP server sends nothing unasked while idle; its death while idle is "
         "killed_between_calls",
    "g": "the SDK server process cannot be made to drip or send garbage without "
         "replacing it; the hand-written hostile servers cover those bytes "
         "(tests/subagent/mcp/test_attack_*.py)",
    "h": "a sink or store is a local file, not a process: it is not killed or revived, "
         "and it sends no bytes (garbage is its file replaced, oversized the disk filling "
         "up, closes_early its file truncated, the hangs a lock held by another "
         "process); idle, it is not touched",
    "i": "our server reads one line at a time and answers in order: a client's fault at "
         "start, idle or mid-call is the same bytes on the same pipe (the mid_call cell)",
    "j": "the Temporal server is spoken to through the SDK's Rust core over gRPC: "
         "dripped, garbage, oversized or cut bytes are that transport's to refuse, not ours",
    "o": "killed_mid_call restarts it on its file: that cell is also this one",
    "k": "the ledger and checkpoints are written by shielded, bounded code: a cancel or "
         "a close waits for the write within its bound (the close cell of hangs shows it)",
    "l": "a client does not take part in closing our server: its stdin ends, it exits",
    "m": "an HTTP server killed before it answers is a closed port: the closes_early cell",
    "p": "a Temporal worker needs a connected client (the SDK refuses a lazy one): a "
         "server down or hung when it starts is Client.connect's error, before any pool",
    "q": "a Temporal server killed while nothing runs is killed_between_calls",
    "r": "a Temporal server that hangs while nothing runs is met by the next call or "
         "poll: the mid_call and cancel cells (the worker's polls wait through it)",
    "s": "a worker closed under a killed server meets refused connections and returns "
         "at once; a close blocked on the server is the hangs cell (CLOSE_TIMEOUT); the "
         "workflow's end after a restart is not checked",
    "n": "a stdio client that comes back is a new process with a new server: there is "
         "no server left to come back to",
}

_MODEL = """
                      starting idle mid_call cancel close
killed_mid_call       d        d    X        e      e
killed_between_calls  b        X    b        b      b
hangs                 d        d    X        X      X
drips                 d        d    X        X      X
garbage               d        d    X        c      c
oversized             d        d    X        c      c
closes_early          d        d    X        c      c
comes_back            X        X    X        c      c
"""

GRIDS = {
    "openai": _MODEL,
    "anthropic": _MODEL,
    "mcp_stdio": """
                      starting idle mid_call cancel close
killed_mid_call       X        f    X        e      e
killed_between_calls  b        X    b        b      b
hangs                 X        f    X        X      X
drips                 g        f    g        g      g
garbage               g        f    g        g      g
oversized             X        f    X        c      c
closes_early          X        f    X        c      c
comes_back            X        f    X        c      c
""",
    "mcp_http": """
                      starting idle mid_call cancel close
killed_mid_call       m        f    X        e      e
killed_between_calls  b        X    b        b      b
hangs                 g        f    X        X      X
drips                 g        f    g        g      g
garbage               g        f    g        g      g
oversized             g        f    X        c      c
closes_early          X        f    g        c      c
comes_back            X        f    X        c      c
""",
    "mcp_client": """
                      starting idle mid_call cancel close
killed_mid_call       i        i    X        e      l
killed_between_calls  b        X    b        b      b
hangs                 i        i    c        X      l
drips                 i        i    X        c      l
garbage               i        i    X        c      l
oversized             i        i    X        c      l
closes_early          i        i    X        c      l
comes_back            n        n    n        n      n
""",
    "jsonl_sink": """
                      starting idle mid_call cancel close
killed_mid_call       h        h    h        h      h
killed_between_calls  h        h    h        h      h
hangs                 h        h    h        h      h
drips                 h        h    h        h      h
garbage               X        h    X        k      k
oversized             X        h    X        k      k
closes_early          X        h    X        k      k
comes_back            h        h    h        h      h
""",
    "sqlite_sink": """
                      starting idle mid_call cancel close
killed_mid_call       h        h    h        h      h
killed_between_calls  h        h    h        h      h
hangs                 X        h    X        k      X
drips                 h        h    h        h      h
garbage               X        h    h        k      k
oversized             X        h    X        k      k
closes_early          X        h    X        k      k
comes_back            h        h    X        h      h
""",
    "checkpoints": """
                      starting idle mid_call cancel close
killed_mid_call       h        h    h        h      h
killed_between_calls  h        h    h        h      h
hangs                 X        h    X        k      k
drips                 h        h    h        h      h
garbage               X        h    h        k      k
oversized             X        h    X        k      k
closes_early          X        h    X        k      k
comes_back            h        h    X        h      h
""",
    "temporal": """
                      starting idle mid_call cancel close
killed_mid_call       p        q    X        X      s
killed_between_calls  b        X    b        b      b
hangs                 p        r    X        X      X
drips                 j        j    j        j      j
garbage               j        j    j        j      j
oversized             j        j    j        j      j
closes_early          j        j    j        j      j
comes_back            p        X    o        o      s
""",
}


def parse(grid: str) -> dict[tuple[str, str], str]:
    """The grid as ``{(fault, moment): "X" or a footnote letter}``."""
    lines = [line.split() for line in grid.strip().splitlines()]
    header, rows = lines[0], lines[1:]
    assert tuple(header) == MOMENTS, header
    assert tuple(row[0] for row in rows) == FAULTS, [row[0] for row in rows]
    return {(row[0], moment): mark for row in rows for moment, mark in zip(header, row[1:],
                                                                            strict=True)}


def cells(*peers: str) -> list[tuple[str, str, str]]:
    """The cells that run, of ``peers`` (all by default), in grid order."""
    return [
        (peer, fault, moment)
        for peer in peers or PEERS
        for (fault, moment), mark in parse(GRIDS[peer]).items()
        if mark == "X"
    ]
