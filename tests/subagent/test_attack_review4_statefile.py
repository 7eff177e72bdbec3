"""Attacks on the paused-run file's lock (review4): ``FILE.lock`` is opened beside a
file the user may keep in a shared folder; whatever someone else put there under that
name (a symbolic link to another file, a FIFO) is refused, never opened through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from subagent._cli._statefile import StateFileError, answer, read_state, write_state
from tests.subagent.test_statefile_lock import paused_with


def test_the_lock_file_is_not_opened_through_a_symlink(tmp_path: Path) -> None:
    path = tmp_path / "paused.json"
    write_state(path, paused_with(1))
    target = tmp_path / "elsewhere"
    target.write_text("someone else's file\n")
    os.symlink(target, tmp_path / "paused.json.lock")
    with pytest.raises(StateFileError) as info:
        answer(path, "c0", allow=True, reason=None, by="alice", run_path=None)
    assert str(info.value) == (
        f"cannot lock the paused run {path}: Too many levels of symbolic links")
    # Nothing was answered, and the link and its target are as they were.
    assert [str(p.status) for p in read_state(path).pending] == ["deferred"]
    assert target.read_text() == "someone else's file\n"
    assert os.path.islink(tmp_path / "paused.json.lock")


def test_the_lock_file_must_be_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "paused.json"
    write_state(path, paused_with(1))
    os.mkfifo(tmp_path / "paused.json.lock")
    with pytest.raises(StateFileError) as info:
        answer(path, "c0", allow=True, reason=None, by="alice", run_path=None)
    assert str(info.value) == (
        f"cannot lock the paused run {path}: its lock file is not a regular file")
