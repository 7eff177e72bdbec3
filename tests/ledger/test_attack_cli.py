"""Attacks on the ledger CLI's output: entries holding terminal controls, format
characters and lone surrogates (a model's output is recorded as it came)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger import Record
from ledger.encoding import encode_entry
from tests.ledger.test_cli import build

HOSTILE = [
    "\x1b]0;pwned\x07",  # ESC: an OSC that retitles the terminal
    "\u009b2J",  # C1 CSI: clears the screen on terminals that honour C1 controls
    "safe\u202etxt.exe",  # right-to-left override: shows "safeexe.txt"
    "zero\u200bwidth",  # zero-width space
    "lone \ud800 surrogate",
    "line\u2028separator",
]


@pytest.fixture
def hostile_ledger(tmp_path: Path) -> Path:
    records = [
        Record("tool_result", "r1", (f"{text}/0001",), "a", tool="t", result=text,
               data={"note": text})
        for text in HOSTILE
    ]
    path = tmp_path / "audit.jsonl"
    path.write_bytes(
        b"".join(encode_entry(e).encode("utf-8", "surrogatepass") + b"\n"
                 for e in build(records))
    )
    return path


UNSAFE = ["\x1b", "\x07", "\u009b", "\u202e", "\u200b", "\u2028", "\ufffd"]


@pytest.mark.parametrize(
    "command",
    [["tail"], ["tail", "--json"], ["tail", "--full"], ["query", "--kind", "tool_result"]],
)
@pytest.mark.slow
def test_hostile_entries_are_shown_escaped(hostile_ledger: Path, command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ledger", command[0], str(hostile_ledger), *command[1:]],
        capture_output=True,
        env={"PYTHONIOENCODING": "utf-8", "PATH": ""},
        check=False,
    )
    assert done.stderr == b""
    assert done.returncode == 0
    out = done.stdout.decode("utf-8")
    assert [ch for ch in UNSAFE if ch in out] == []
    assert out.count("\n") == len(HOSTILE)
