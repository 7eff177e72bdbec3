"""Workspace tool arguments: a result or a ``WorkspaceError``, nothing else.

Every input runs one of ``read_file``, ``list_dir``, ``grep``, ``write_file`` on a
workspace with files, symlinks inside and out, a loop, a hard link to outside and
a FIFO: half the inputs are the bytes as argument text, half are JSON objects built
from the bytes (paths made of awkward parts, hostile and uncompilable patterns,
contents around the size limit, limits of the tools themselves). Whatever happens,
nothing outside the workspace is read or changed and no text names the host path.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import trio

from subagent.tools import WorkspaceError, workspace_tools
from subagent.tools._workspace import MAX_WRITE_BYTES

from ._bytes import ByteReader
from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (WorkspaceError,)

_BASE = tempfile.mkdtemp(prefix="fuzz-workspace-")
_ROOT = os.path.join(_BASE, "ws")
_OUTSIDE = os.path.join(_BASE, "outside")
_SECRET = "SECRET outside\n"


def _layout() -> None:
    os.makedirs(os.path.join(_ROOT, "sub", "deep"))
    os.makedirs(_OUTSIDE)
    with open(os.path.join(_OUTSIDE, "secret.txt"), "w", encoding="utf-8") as f:
        f.write(_SECRET)
    with open(os.path.join(_ROOT, "a.txt"), "w", encoding="utf-8") as f:
        f.write("alpha\nbeta\n" + "a" * 42 + "\n")
    with open(os.path.join(_ROOT, "sub", "deep", "c.md"), "w", encoding="utf-8") as f:
        f.write("gamma beta\n")
    os.link(os.path.join(_OUTSIDE, "secret.txt"), os.path.join(_ROOT, "hard.txt"))
    os.symlink("sub", os.path.join(_ROOT, "link_in"))
    os.symlink("../outside", os.path.join(_ROOT, "link_out"))
    os.symlink(os.path.join(_OUTSIDE, "secret.txt"), os.path.join(_ROOT, "link_secret"))
    os.symlink("loop", os.path.join(_ROOT, "loop"))
    os.mkfifo(os.path.join(_ROOT, "fifo"))


_layout()

TOOLS = ("read_file", "list_dir", "grep", "write_file")
KEYS = ("path", "pattern", "content", "extra", "")
PARTS = ("a.txt", "..", ".", "", "sub", "deep", "c.md", "link_in", "link_out",
         "link_secret", "loop", "hard.txt", "fifo", "new", "x" * 300, "\x00", "é",
         "\ud800", "/", "C:", "~")
PATTERNS = ("beta", "(a+)+b", "(", "a{99999999999}", "(?=a)", "\\1", "[", "", ".*",
            "(?:a?){1000}a{1000}b", "(" * 2000, "SECRET", "(?i)BETA", "a{1001}", "\\C")


def _path(reader: ByteReader) -> str:
    if reader.below(4) == 3:
        return reader.text()
    lead = reader.choice(("", "/", "./", "../", "//"))
    parts = [reader.choice(PARTS) for _ in range(1 + reader.below(6))]
    if reader.below(16) == 15:
        parts *= 400  # thousands of components
    return lead + "/".join(parts)


def _content(reader: ByteReader) -> str:
    kind = reader.below(8)
    if kind == 7:
        return "é" * (MAX_WRITE_BYTES // 2 + reader.below(3) - 1)  # around the cap
    return reader.text()


def _value(reader: ByteReader, key: str) -> Any:
    kind = reader.below(8)
    if kind >= 3:
        if key == "pattern":
            return reader.choice(PATTERNS) if reader.below(2) else reader.text()
        if key == "content":
            return _content(reader)
        return _path(reader)
    if kind == 0:
        return reader.number()
    if kind == 1:
        return reader.choice((None, True, [], {}, [_path(reader)]))
    return reader.text()


def call(data: bytes) -> tuple[str, dict[str, int], str]:
    """The tool, its limits and the argument text an input stands for."""
    reader = ByteReader(data)
    tool = reader.choice(TOOLS)
    limits = {"max_read_bytes": reader.choice((1, 2, 4, 256 * 1024)),
              "max_matches": reader.choice((0, 1, 200))}
    if reader.below(2):
        return tool, limits, data[reader.pos:].decode("utf-8", "replace")
    value: dict[str, Any] = {}
    if not reader.below(2):
        # A valid call with a few of its parts changed, so success is reached often.
        value = {"path": _path(reader)}
        if tool == "grep":
            value["pattern"] = reader.choice(PATTERNS)
        if tool == "write_file":
            value["content"] = _content(reader)
    # Exhausted bytes read as zeros: zero means "the plain case" everywhere.
    for _ in range(reader.below(3)):
        key = reader.choice(KEYS)
        value[key] = _value(reader, key)
    if reader.below(8) == 7:
        return tool, limits, json.dumps(value)[: reader.below(40)]
    return tool, limits, json.dumps(value)


def target(data: bytes) -> None:
    tool, limits, text = call(data)
    tools = {t.name: t for t in workspace_tools(
        _ROOT, max_read_bytes=limits["max_read_bytes"], max_matches=limits["max_matches"]
    )}

    async def run() -> str:
        try:
            return await tools[tool].execute(text)
        except WorkspaceError as exc:
            assert _BASE not in str(exc), str(exc)
            raise

    try:
        output = trio.run(run)
        assert _BASE not in output, output
        assert "SECRET" not in output, output
    finally:
        assert os.listdir(_OUTSIDE) == ["secret.txt"]
        with open(os.path.join(_OUTSIDE, "secret.txt"), encoding="utf-8") as f:
            assert f.read() == _SECRET


if __name__ == "__main__":
    main(target, ALLOWED)
