"""The workspace tools: exact results, exact errors, and confinement to the root."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore import Tool, is_read_only
from subagent.tools import Workspace, WorkspaceError, _files, workspace_tools


def make_layout(base: Path) -> Path:
    """A workspace with files, inside and outside symlinks, a loop and a .git dir."""
    root = base / "ws"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / ".git").mkdir()
    (base / "outside").mkdir()
    (root / "a.txt").write_text("alpha\nbeta\n")
    (root / "sub" / "b.txt").write_text("beta two\n")
    (root / "sub" / "deep" / "c.md").write_text("gamma beta\n")
    (root / ".git" / "config").write_text("beta hidden\n")
    (root / "bin.dat").write_bytes(b"beta\0")
    (base / "outside" / "secret.txt").write_text("SECRET beta\n")
    (root / "link_in").symlink_to("sub")
    (root / "link_file").symlink_to("a.txt")
    (root / "link_out").symlink_to("../outside")
    (root / "link_secret").symlink_to(base / "outside" / "secret.txt")
    (root / "loop").symlink_to("loop")
    return root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_layout(tmp_path)


def tools(root: Path, **limits: Any) -> dict[str, Tool]:
    return {t.name: t for t in workspace_tools(root, **limits)}


async def call(root: Path, name: str, **args: object) -> str:
    return await tools(root)[name].execute(json.dumps(args))


async def refused(root: Path, name: str, message: str, **args: object) -> None:
    with pytest.raises(WorkspaceError) as info:
        await call(root, name, **args)
    assert str(info.value) == message


def test_the_tools_and_their_flags(root: Path) -> None:
    ts = workspace_tools(root)
    assert [(t.name, is_read_only(t)) for t in ts] == [
        ("read_file", True),
        ("list_dir", True),
        ("grep", True),
        ("write_file", False),
    ]
    assert all(isinstance(t, Tool) for t in ts)
    assert ts[3].parameters == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "A path relative to the workspace root."},
            "content": {"type": "string"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError) as info:
        workspace_tools(tmp_path / "nope")
    assert str(info.value) == f"Workspace root {str(tmp_path / 'nope')!r} is not a directory"


async def test_read_file(root: Path) -> None:
    assert await call(root, "read_file", path="a.txt") == "alpha\nbeta\n"
    assert await call(root, "read_file", path="link_file") == "alpha\nbeta\n"
    assert await call(root, "read_file", path="link_in/b.txt") == "beta two\n"
    assert await call(root, "read_file", path="sub/deep/../b.txt") == "beta two\n"


async def test_read_file_truncates_and_says_so(root: Path) -> None:
    (root / "h.txt").write_text("héllo", encoding="utf-8")  # 6 bytes
    read = tools(root, max_read_bytes=4)["read_file"]
    assert (
        await read.execute('{"path": "h.txt"}')
        == "hél\n[truncated: showing the first 4 bytes of 6]"
    )
    read = tools(root, max_read_bytes=2)["read_file"]  # cuts the é in half: left out
    assert (
        await read.execute('{"path": "h.txt"}') == "h\n[truncated: showing the first 2 bytes of 6]"
    )
    read = tools(root, max_read_bytes=6)["read_file"]
    assert await read.execute('{"path": "h.txt"}') == "héllo"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("missing.txt", "'missing.txt' does not exist"),
        ("sub", "'sub' is a directory, not a file"),
        ("../outside/secret.txt", "'../outside/secret.txt' is outside the workspace"),
        ("sub/../../outside/secret.txt", "'sub/../../outside/secret.txt' is outside the workspace"),
        ("link_out/secret.txt", "'link_out/secret.txt' is outside the workspace"),
        ("link_secret", "'link_secret' is outside the workspace"),
        (
            "/etc/passwd",
            "'/etc/passwd' is an absolute path; give a path relative to the workspace root",
        ),
        ("loop", "'loop' cannot be resolved: a symlink loops"),
        ("a\0.txt", "'a\\x00.txt' contains a NUL byte"),
        ("", "The path is empty; give a path relative to the workspace root"),
    ],
)
async def test_read_file_refusals(root: Path, path: str, message: str) -> None:
    await refused(root, "read_file", message, path=path)


async def test_read_file_refuses_special_files(root: Path) -> None:
    os.mkfifo(root / "fifo")
    await refused(root, "read_file", "'fifo' is not a regular file", path="fifo")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            "{",
            "The arguments are not valid JSON: "
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        ("[]", "The arguments must be a JSON object"),
        ("{}", "Missing argument 'path'"),
        ('{"path": 3}', "Argument 'path' must be a string"),
        ('{"path": "a.txt", "mode": "r"}', "Unknown argument 'mode' (expected path)"),
    ],
)
async def test_bad_arguments(root: Path, arguments: str, message: str) -> None:
    with pytest.raises(WorkspaceError) as info:
        await tools(root)["read_file"].execute(arguments)
    assert str(info.value) == message


async def test_list_dir(root: Path) -> None:
    assert await call(root, "list_dir") == "\n".join(
        [
            ".git/",
            "a.txt",
            "bin.dat",
            "link_file",
            "link_in/",
            "link_out",  # a symlink to a directory outside: not marked as a directory
            "link_secret",
            "loop",
            "sub/",
        ]
    )
    assert await call(root, "list_dir", path="link_in") == "b.txt\ndeep/"
    (root / "empty").mkdir()
    assert await call(root, "list_dir", path="empty") == "(empty directory)"
    await refused(root, "list_dir", "'a.txt' is not a directory", path="a.txt")
    await refused(root, "list_dir", "'link_out' is outside the workspace", path="link_out")
    await refused(root, "list_dir", "'..' is outside the workspace", path="..")


async def test_list_dir_caps_its_entries(root: Path) -> None:
    many = root / "many"
    many.mkdir()
    for i in range(1003):
        (many / f"f{i:04d}").touch()
    lines = (await call(root, "list_dir", path="many")).split("\n")
    assert len(lines) == 1001
    assert (lines[0], lines[999], lines[1000]) == ("f0000", "f0999", "[... and 3 more entries]")


async def test_list_dir_stops_reading_a_huge_directory(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_files, "MAX_LIST_READ", 4)
    monkeypatch.setattr(_files, "MAX_LIST_ENTRIES", 2)
    many = root / "many"
    many.mkdir()
    for i in range(6):
        (many / f"f{i}").touch()
    lines = (await call(root, "list_dir", path="many")).split("\n")
    assert len(lines) == 3
    assert lines[2] == "[... and more: listing stopped after reading 4 entries]"


async def test_grep(root: Path) -> None:
    # Not searched: .git, binary files, symlinked directories, symlinks leading outside.
    assert await call(root, "grep", pattern="beta") == (
        "a.txt:2: beta\nlink_file:2: beta\nsub/b.txt:1: beta two\nsub/deep/c.md:1: gamma beta"
    )
    assert await call(root, "grep", pattern=r"^gam+a", path="sub") == "sub/deep/c.md:1: gamma beta"
    assert await call(root, "grep", pattern="two", path="sub/b.txt") == "sub/b.txt:1: beta two"
    # A symlinked directory given as the path is searched, under its real name.
    assert await call(root, "grep", pattern="beta", path="link_in") == (
        "sub/b.txt:1: beta two\nsub/deep/c.md:1: gamma beta"
    )
    assert await call(root, "grep", pattern="zeta") == "no matches"


async def test_grep_limits(root: Path) -> None:
    grep = tools(root, max_matches=2)["grep"]
    assert await grep.execute('{"pattern": "beta"}') == (
        "a.txt:2: beta\nlink_file:2: beta\n[stopped after 2 matches]"
    )
    (root / "long.txt").write_text("x" * 400 + "\n")
    assert (
        await call(root, "grep", pattern="x", path="long.txt") == "long.txt:1: " + "x" * 300 + "..."
    )


async def test_grep_refusals(root: Path) -> None:
    await refused(
        root,
        "grep",
        "Invalid pattern '(': missing ): (",  # RE2's message
        pattern="(",
    )
    await refused(
        root, "grep", "'link_out' is outside the workspace", pattern="beta", path="link_out"
    )
    await refused(root, "grep", "Missing argument 'pattern'", path=".")


async def test_write_file(root: Path) -> None:
    assert await call(root, "write_file", path="new/dir/x.txt", content="héllo") == (
        "Wrote 6 bytes to new/dir/x.txt"
    )
    assert (root / "new" / "dir" / "x.txt").read_text(encoding="utf-8") == "héllo"
    assert await call(root, "write_file", path="a.txt", content="") == "Wrote 0 bytes to a.txt"
    assert (root / "a.txt").read_text() == ""
    # Through a symlink inside the workspace: the target is written.
    assert await call(root, "write_file", path="link_file", content="via link") == (
        "Wrote 8 bytes to a.txt"
    )
    assert (root / "a.txt").read_text() == "via link"
    # A lone surrogate (valid in JSON text, not in UTF-8) is written as "?".
    assert await tools(root)["write_file"].execute('{"path": "s.txt", "content": "a\\ud800"}') == (
        "Wrote 2 bytes to s.txt"
    )
    assert (root / "s.txt").read_bytes() == b"a?"


async def test_write_file_refusals(root: Path) -> None:
    await refused(
        root,
        "write_file",
        "'sub' is a directory; cannot write a file there",
        path="sub",
        content="",
    )
    await refused(
        root, "write_file", "'.' is a directory; cannot write a file there", path=".", content=""
    )
    await refused(
        root,
        "write_file",
        "'link_out/new.txt' is outside the workspace",
        path="link_out/new.txt",
        content="x",
    )
    await refused(
        root,
        "write_file",
        "'link_secret' is outside the workspace",
        path="link_secret",
        content="x",
    )
    await refused(root, "write_file", "'../x' is outside the workspace", path="../x", content="x")
    await refused(root, "write_file", "Missing argument 'content'", path="x")
    assert sorted(p.name for p in (root.parent / "outside").iterdir()) == ["secret.txt"]
    assert (root.parent / "outside" / "secret.txt").read_text() == "SECRET beta\n"


# Confinement, by hypothesis: paths made of parts that climb, jump and follow links.
PARTS = st.sampled_from(
    [
        "..",
        ".",
        "a.txt",
        "sub",
        "deep",
        "link_in",
        "link_out",
        "link_secret",
        "link_file",
        "loop",
        "new",
        "",
    ]
)
PATHS = st.builds(
    lambda lead, parts: lead + "/".join(parts),
    st.sampled_from(["", "/", "//", "./", "../"]),
    st.lists(PARTS, max_size=6),
)


@pytest.fixture(scope="module")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_layout(tmp_path_factory.mktemp("confine"))


@settings(max_examples=300)
@given(path=PATHS)
def test_resolve_accepts_exactly_the_paths_inside(shared_root: Path, path: str) -> None:
    ws = Workspace.open(shared_root)
    real = Path(os.path.realpath(shared_root / path))
    inside = real == shared_root or shared_root in real.parents
    try:
        resolved = ws.resolve(path)
    except WorkspaceError:
        assert path == "" or path.startswith("/") or not inside or "loop" in path
    else:
        assert path != "" and not path.startswith("/")
        assert resolved == real
        assert inside


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=PATHS, tool=st.sampled_from(["read_file", "list_dir", "grep", "write_file"]))
def test_no_tool_reaches_outside(tmp_path: Path, path: str, tool: str) -> None:
    base = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
    root = make_layout(base)
    args: dict[str, str] = {"path": path}
    if tool == "grep":
        args["pattern"] = "SECRET|beta"
    if tool == "write_file":
        args["content"] = "written"

    async def main() -> str:
        try:
            return await tools(root)[tool].execute(json.dumps(args))
        except WorkspaceError:
            return ""

    result = trio.run(main)
    assert "SECRET" not in result
    assert "secret.txt" not in result
    assert [p.name for p in (base / "outside").iterdir()] == ["secret.txt"]
    assert (base / "outside" / "secret.txt").read_text() == "SECRET beta\n"
