"""grep cannot freeze the process: RE2 in linear time off the trio thread, bounded
patterns, uncompilable patterns as WorkspaceError results, a fixed-string mode."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import trio

from subagent.tools import Workspace, WorkspaceError, _grep, _root, workspace_tools

#: Patterns catastrophic for a backtracking engine (the first is the issue's: with
#: Python's re it froze the process over 42 a's), and the slowest found for RE2
#: (large programs over long lines; a DFA overflowing its cache).
HOSTILE = [
    "(a+)+b",
    "(a|aa)*c",
    "(?:a?){300}a{300}b",
    "(.*a){100}b",
    "[a-z]{990}[0-9]",
    "(?:[ax]*a[ax]{20}c|(?:a?){300}a{300}c)",
]


def hostile_tree(root: Path) -> None:
    """Files the patterns above do not match: many short lines of a's, one 1 MB line
    of a's, and 200 KB of random a's and x's (2 MB in all)."""
    for i in range(4):
        (root / f"lines{i}.txt").write_bytes((b"a" * 42 + b"\n") * 6_000)
    (root / "long.txt").write_bytes(b"a" * 1_000_000)
    rnd = random.Random(1)
    (root / "ax.txt").write_bytes(bytes(rnd.choice(b"ax") for _ in range(200_000)))


@pytest.mark.slow
async def test_a_hostile_grep_never_holds_up_the_event_loop(tmp_path: Path) -> None:
    hostile_tree(tmp_path)
    grep = {t.name: t for t in workspace_tools(tmp_path)}["grep"]
    gaps: list[float] = []
    results: list[str] = []

    async def heartbeat(task_status: trio.TaskStatus[None]) -> None:
        last = trio.current_time()
        task_status.started()
        while True:
            await trio.sleep(0.05)
            now = trio.current_time()
            gaps.append(now - last)
            last = now

    async with trio.open_nursery() as nursery:
        await nursery.start(heartbeat)
        for pattern in HOSTILE:
            results.append(await grep.execute(json.dumps({"pattern": pattern})))
        nursery.cancel_scope.cancel()
    assert results == ["no matches"] * len(HOSTILE)
    assert len(gaps) >= 3, "the searches ended before the heartbeat could measure them"
    # Ticks every 50 ms; generous slack for a loaded machine.
    assert max(gaps) < 0.5, max(gaps)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(", "Invalid pattern '(': missing ): ("),
        ("a{1001}", "Invalid pattern 'a{1001}': invalid repetition size: {1001}"),
        ("(?=a)b", "Invalid pattern '(?=a)b': invalid perl operator: (?="),
        (r"(a)\1", "Invalid pattern '(a)\\\\1': invalid escape sequence: \\1"),
        ("a**", "Invalid pattern 'a**': bad repetition operator: **"),
        ("\\", "Invalid pattern '\\\\': trailing \\"),
        ("\ud800", "The pattern is not valid Unicode (a lone surrogate)"),
        ("(" * 1001, "The pattern is too long: 1001 characters; the limit is 1000"),
        ("(" * 100_000, "The pattern is too long: 100000 characters; the limit is 1000"),
        (
            "(" * 1000,
            "Invalid pattern " + repr("(" * 120) + "... (1000 characters): missing ): "
            + "(" * 189 + "...",
        ),
    ],
)
async def test_uncompilable_patterns_are_workspace_errors(
    tmp_path: Path, pattern: str, message: str
) -> None:
    grep = {t.name: t for t in workspace_tools(tmp_path)}["grep"]
    with pytest.raises(WorkspaceError) as info:
        await grep.execute(json.dumps({"pattern": pattern}))
    assert str(info.value) == message


async def test_huge_repetitions_are_no_overflow(tmp_path: Path) -> None:
    # Python's re raised OverflowError; RE2 takes a count it cannot hold as literal text.
    (tmp_path / "a.txt").write_text("a{99999999999}\n")
    grep = {t.name: t for t in workspace_tools(tmp_path)}["grep"]
    assert await grep.execute('{"pattern": "a{99999999999}"}') == "a.txt:1: a{99999999999}"
    with pytest.raises(WorkspaceError) as info:
        await grep.execute('{"pattern": "(?:a{1000}){1000}"}')
    assert str(info.value) == (
        "Invalid pattern '(?:a{1000}){1000}': invalid repetition size: {1000}"
    )


async def test_a_pattern_too_complex(tmp_path: Path) -> None:
    grep = {t.name: t for t in workspace_tools(tmp_path)}["grep"]
    with pytest.raises(WorkspaceError) as info:
        await grep.execute('{"pattern": "(?:a?){1000}a{1000}b"}')
    assert str(info.value) == (
        "Invalid pattern '(?:a?){1000}a{1000}b': too complex (3005 RE2 instructions; "
        "the limit is 1000); search for a simpler pattern"
    )


async def test_a_pattern_too_large_for_re2_memory(tmp_path: Path) -> None:
    grep = {t.name: t for t in workspace_tools(tmp_path)}["grep"]
    pattern = "[^a]{1000}" * 90  # within the length limit, over RE2_MAX_MEM
    with pytest.raises(WorkspaceError) as info:
        await grep.execute(json.dumps({"pattern": pattern}))
    assert str(info.value) == (
        f"Invalid pattern {pattern[:120]!r}... (900 characters): "
        "pattern too large - compile failed"
    )


async def test_fixed_string_mode(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x(a+)+b\naab\na.b\n")
    ts = {t.name: t for t in workspace_tools(tmp_path, regex=False)}
    grep = ts["grep"]
    assert grep.description == (
        "Search the files of the workspace for lines containing a fixed string (not a "
        "regular expression: every character matches itself); prints 'path:line: text', "
        "at most 200 matches."
    )
    assert grep.parameters["properties"]["pattern"]["description"] == (
        "A fixed string (at most 1000 characters)."
    )
    assert await grep.execute('{"pattern": "(a+)+b"}') == "a.txt:1: x(a+)+b"
    assert await grep.execute('{"pattern": "a.b"}') == "a.txt:3: a.b"
    with pytest.raises(WorkspaceError) as info:
        await grep.execute(json.dumps({"pattern": "x" * 1001}))
    assert str(info.value) == "The pattern is too long: 1001 characters; the limit is 1000"


def test_regex_mode_describes_re2(tmp_path: Path) -> None:
    grep = {t.name: t for t in workspace_tools(tmp_path, regex=True)}["grep"]
    assert grep.description == (
        "Search the files of the workspace for lines matching an RE2 regular expression "
        "(no backreferences or lookaround); prints 'path:line: text', at most 200 matches."
    )


def test_regex_without_re2_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_root, "HAVE_RE2", False)
    with pytest.raises(WorkspaceError) as info:
        Workspace.open(tmp_path, regex=True)
    assert str(info.value) == (
        "grep with regular expressions needs google-re2: pip install 'subagent[tools]'"
    )
    assert Workspace.open(tmp_path).regex is False


async def test_grep_stops_at_its_byte_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:


    monkeypatch.setattr(_grep, "MAX_GREP_TOTAL_BYTES", 10)
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text("hit\n")  # 4 bytes each
    grep = {t.name: t for t in workspace_tools(tmp_path)}["grep"]
    assert await grep.execute('{"pattern": "hit"}') == (
        "a:1: hit\nb:1: hit\n[stopped after searching 8 bytes]"
    )


async def test_grep_stops_at_its_entry_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:


    monkeypatch.setattr(_grep, "MAX_GREP_ENTRIES", 2)
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text("hit\n")
    grep = {t.name: t for t in workspace_tools(tmp_path)}["grep"]
    assert await grep.execute('{"pattern": "zzz"}') == (
        "no matches\n[stopped after 2 directory entries]"
    )


async def test_grep_walks_no_deeper_than_its_depth_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:


    monkeypatch.setattr(_grep, "MAX_GREP_DEPTH", 2)
    deep = tmp_path / "1" / "2" / "3"
    deep.mkdir(parents=True)
    for d in (tmp_path, tmp_path / "1", tmp_path / "1" / "2", deep):
        (d / "f").write_text("hit\n")
    grep = {t.name: t for t in workspace_tools(tmp_path)}["grep"]
    assert await grep.execute('{"pattern": "hit"}') == "f:1: hit\n1/f:1: hit\n1/2/f:1: hit"
