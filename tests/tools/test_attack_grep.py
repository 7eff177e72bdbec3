"""Attacks on grep's promise to stop soon once abandoned: a tree whose symlinks are
each expensive to resolve and lead to no file."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from subagent.tools import Workspace, WorkspaceTool, _grep
from subagent.tools._files import grep

LINKS = 2000


def costly_links(root: Path) -> None:
    # Each link walks "d/.." 125 times (250 directory opens), then names nothing.
    (root / "d").mkdir()
    target = "/".join(["d", ".."] * 125) + "/missing"
    for i in range(LINKS):
        os.symlink(target, root / f"l{i:05d}")


async def test_an_abandoned_grep_stops_among_symlinks_that_lead_to_no_file(
    tmp_path: Path, monkeypatch: Any
) -> None:
    costly_links(tmp_path)
    resolved = 0
    reached = threading.Event()
    finished = threading.Event()
    original = _grep._Search.linked_file

    def counting(self: _grep._Search, rel: str) -> None:
        nonlocal resolved
        resolved += 1
        if resolved == 10:
            reached.set()
        original(self, rel)

    monkeypatch.setattr(_grep._Search, "linked_file", counting)

    def operation(workspace: Workspace, args: Mapping[str, Any]) -> str:
        try:
            return grep(workspace, args)
        finally:
            finished.set()

    tool = WorkspaceTool("grep", "grep", {"type": "object", "properties": {
        "pattern": {"type": "string"}}}, True, Workspace.open(tmp_path), operation)
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tool.execute, '{"pattern": "x"}')
            await trio.to_thread.run_sync(reached.wait)
            at_cancel = resolved
            scope.cancel()
    await trio.to_thread.run_sync(finished.wait, 120)
    assert finished.is_set()
    # Stopped within a few links of the cancel, not after resolving all 2,000.
    assert resolved - at_cancel < LINKS // 10, (at_cancel, resolved)
