"""Attacks on verify, tail and query through the ledger path: a FIFO, a device, a
directory in place of the file (a tamperer can swap the file for any of them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def special(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "audit.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    return path


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "zero", "directory"])
@pytest.mark.parametrize("command", [["verify"], ["tail"], ["query"], ["repair"]])
def test_a_ledger_that_is_not_a_regular_file_is_refused_at_once(
    tmp_path: Path, kind: str, command: list[str]
) -> None:
    path = special(tmp_path, kind)
    # The child is killed if it hangs (a FIFO with no writer, /dev/zero read forever).
    done = subprocess.run(
        [sys.executable, "-m", "ledger", *command, str(path)],
        capture_output=True, timeout=20, check=False,
    )
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode().startswith(f"error: cannot read ledger {path}: ")
    assert b"Traceback" not in done.stderr
