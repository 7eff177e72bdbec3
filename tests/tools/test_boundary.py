"""The workspace is a real boundary: attacks on it, as issue 13 describes them."""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore import Tool
from subagent.tools import WorkspaceError, workspace_tools

from .test_workspace import make_layout


def tools(root: Path, **limits: Any) -> dict[str, Tool]:
    return {t.name: t for t in workspace_tools(root, **limits)}


async def refusal(root: Path, name: str, **args: object) -> str:
    with pytest.raises(WorkspaceError) as info:
        await tools(root)[name].execute(json.dumps(args))
    return str(info.value)


# -- long names and deep paths -----------------------------------------------------------


async def test_a_long_name_is_a_workspace_error_without_the_host_path(tmp_path: Path) -> None:
    name = "x" * 10_000
    for tool, args in [("write_file", {"content": "c"}), ("read_file", {}),
                       ("list_dir", {}), ("grep", {"pattern": "x"})]:
        message = await refusal(tmp_path, tool, path=name, **args)
        assert message == (
            f"{'x' * 120!r}... (10000 characters) is too long: 10000 characters; "
            "the limit is 4096"
        )
    # Over the file system's name limit (255 bytes) but within the path limit.
    message = await refusal(tmp_path, "write_file", path="y" * 300, content="c")
    assert message == f"{'y' * 120!r}... (300 characters) cannot be resolved: File name too long"
    assert str(tmp_path) not in message


async def test_many_components_are_a_workspace_error(tmp_path: Path) -> None:
    path = "a/" * 2_000 + "f"
    expected = f"{'a/' * 60!r}... (4001 characters) has 2001 components; the limit is 256"
    assert await refusal(tmp_path, "write_file", path=path, content="c") == expected
    assert await refusal(tmp_path, "read_file", path=path) == expected
    # Many ".." and "." are components too: no RecursionError, no climbing out.
    message = await refusal(tmp_path, "read_file", path="./" * 200 + "../" * 50 + "x")
    assert message.endswith(" is outside the workspace")


async def test_a_deep_path_within_the_limits_works(tmp_path: Path) -> None:
    path = "d/" * 200 + "f.txt"
    assert await tools(tmp_path)["write_file"].execute(
        json.dumps({"path": path, "content": "deep"})
    ) == f"Wrote 4 bytes to {path}"
    assert await tools(tmp_path)["read_file"].execute(json.dumps({"path": path})) == "deep"
    assert await tools(tmp_path)["grep"].execute('{"pattern": "deep"}') == "no matches"
    # grep descends at most 64 directories: the file is out of its reach from the root.
    assert await tools(tmp_path)["grep"].execute(
        json.dumps({"pattern": "deep", "path": "d/" * 190})
    ) == f"{path}:1: deep"


async def test_write_file_caps_its_content(tmp_path: Path) -> None:
    message = await refusal(tmp_path, "write_file", path="big", content="é" * 600_000)
    assert message == "The content is too large: 1200000 bytes (UTF-8); the limit is 1048576"
    assert not (tmp_path / "big").exists()
    small = tools(tmp_path, max_write_bytes=3)["write_file"]
    assert await small.execute('{"path": "s", "content": "abc"}') == "Wrote 3 bytes to s"


async def test_write_file_replaces_atomically_and_keeps_the_mode(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text("old")
    (tmp_path / "run.sh").chmod(0o750)
    assert await tools(tmp_path)["write_file"].execute(
        '{"path": "run.sh", "content": "new"}'
    ) == "Wrote 3 bytes to run.sh"
    assert (tmp_path / "run.sh").read_text() == "new"
    assert stat.S_IMODE((tmp_path / "run.sh").stat().st_mode) == 0o750
    assert sorted(os.listdir(tmp_path)) == ["run.sh"]  # no temporary left


async def test_a_fifo_is_never_opened_for_writing(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    assert await refusal(tmp_path, "write_file", path="fifo", content="x") == (
        "'fifo' is not a regular file"
    )
    assert await tools(tmp_path)["grep"].execute('{"pattern": "x"}') == "no matches"


# -- hard links ----------------------------------------------------------------------------


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET\n")
    os.link(secret, root / "hard.txt")
    return root


async def test_a_hard_link_to_outside_is_refused(linked: Path) -> None:
    expected = (
        "'hard.txt' has 2 hard links; files with more than one are refused "
        "(another link may be outside the workspace)"
    )
    assert await refusal(linked, "read_file", path="hard.txt") == expected
    assert await refusal(linked, "write_file", path="hard.txt", content="x") == expected
    assert await refusal(linked, "grep", path="hard.txt", pattern="SECRET") == expected
    assert await tools(linked)["grep"].execute('{"pattern": "SECRET"}') == "no matches"
    assert (linked.parent / "secret.txt").read_text() == "SECRET\n"


# -- a directory swapped for a symlink to outside, thousands of times ----------------------

FLIPS = 3000


async def test_a_swap_race_never_reads_or_writes_outside(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("inside")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("SECRET")
    link = tmp_path / "link"
    link.symlink_to(outside)
    parked = tmp_path / "parked"
    done = threading.Event()

    def place(source: Path) -> None:
        # While d is away, write_file may create a fresh d (it creates missing
        # parents): clear it away and try again.
        while True:
            try:
                os.rename(source, root / "d")
                return
            except OSError:
                shutil.rmtree(root / "d", ignore_errors=True)

    def flip() -> None:
        # d is a directory, then a symlink to outside, then a directory again.
        try:
            for _ in range(FLIPS):
                os.rename(root / "d", parked)
                place(link)
                os.rename(root / "d", link)
                place(parked)
        finally:
            done.set()

    ts = tools(root)
    reads: list[str] = []
    errors: list[str] = []
    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        n = 0
        while not done.is_set() or n < 200:
            n += 1
            try:
                reads.append(await ts["read_file"].execute('{"path": "d/f.txt"}'))
            except WorkspaceError as exc:
                errors.append(str(exc))
            try:
                await ts["write_file"].execute(json.dumps({"path": f"d/w{n % 7}.txt",
                                                           "content": "w"}))
            except WorkspaceError as exc:
                errors.append(str(exc))
    finally:
        flipper.join()
    assert set(reads) <= {"inside"}
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_text() == "SECRET"
    assert all(str(tmp_path) not in e for e in errors)
    # The race was run: some calls met the symlink (or the gap) and were refused.
    assert reads and errors


# -- any arguments: a result or a WorkspaceError, never another exception ------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=8,
)
PARTS = st.sampled_from(
    ["..", ".", "", "a.txt", "sub", "deep", "link_in", "link_out", "link_secret", "link_file",
     "loop", "new", "bin.dat", ".git", "x" * 300, "\ud800", "\0", "é", "/", "\\", "C:"]
)
PATHS = st.builds("/".join, st.lists(PARTS, max_size=8)) | st.text(max_size=40)
PATTERNS = st.sampled_from(
    ["beta", "(a+)+b", "(", "a{99999999999}", "(?=x)", "\\1", "[", "", "SECRET", "é",
     "\ud800", "(?:a?){1000}a{1000}", ".*"]
) | st.text(max_size=20)
VALUES = PATHS | PATTERNS | JSON | st.integers(min_value=0, max_value=10**20)
ARGUMENTS = st.dictionaries(
    st.sampled_from(["path", "pattern", "content", "extra"]), VALUES, max_size=4
) | JSON


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_layout(tmp_path_factory.mktemp("fuzzed"))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tool=st.sampled_from(["read_file", "list_dir", "grep", "write_file"]),
    arguments=ARGUMENTS,
    raw=st.booleans(),
)
def test_any_arguments_give_a_result_or_a_workspace_error(
    layout: Path, tool: str, arguments: Any, raw: bool
) -> None:
    text = json.dumps(arguments)[:-1] if raw else json.dumps(arguments)

    async def main() -> str:
        try:
            return await tools(layout)[tool].execute(text)
        except WorkspaceError as exc:
            return str(exc)

    result = trio.run(main)
    assert isinstance(result, str)
    base = str(layout.parent)
    assert base not in result and os.path.realpath(base) not in result
    assert "SECRET" not in result
    outside = layout.parent / "outside"
    assert [p.name for p in outside.iterdir()] == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "SECRET beta\n"


async def test_names_that_are_not_utf8_are_shown_as_valid_unicode(tmp_path: Path) -> None:
    (tmp_path / os.fsdecode(b"bad\xff.txt")).write_bytes(b"hit\n")
    ts = tools(tmp_path)
    assert await ts["list_dir"].execute("{}") == "bad\ufffd.txt"
    assert await ts["grep"].execute('{"pattern": "hit"}') == "bad\ufffd.txt:1: hit"
    (tmp_path / "link").symlink_to(os.fsdecode(b"bad\xff.txt"))
    assert await ts["write_file"].execute('{"path": "link", "content": "x"}') == (
        "Wrote 1 bytes to bad\ufffd.txt"
    )
    # A lone surrogate cannot name a file: the path is refused.
    assert await refusal(tmp_path, "read_file", path="bad\udcff.txt") == (
        "'bad\\udcff.txt' is not valid Unicode (a lone surrogate)"
    )
