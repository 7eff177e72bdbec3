"""Attacks on verify's bounded memory: a ledger of very short lines (each costs the
line index 8 bytes however short it is)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ledger import verify
from ledger._jsonl_file import LineFile


def index_bytes(lines: LineFile) -> int:
    return sum(sys.getsizeof(value) for value in vars(lines).values())


@pytest.mark.slow
def test_the_index_of_a_file_of_newlines_is_far_smaller_than_the_file(tmp_path: Path) -> None:
    path = tmp_path / "newlines.jsonl"
    path.write_bytes(b"\n" * 4_000_000)
    fd = os.open(path, os.O_RDONLY)
    try:
        lines = LineFile(fd)
        assert len(lines) == 4_000_000
        # 8 bytes a line made this 32 MB for a 4 MB file.
        assert index_bytes(lines) < 1_000_000
        assert lines.line(3_999_999) == b""
    finally:
        os.close(fd)
    report = verify(path)
    assert (report.ok, report.entries, report.first_bad, report.problem) == (
        False, 4_000_000, 1, "malformed"
    )


def test_lines_are_found_in_any_order(tmp_path: Path) -> None:
    texts = [b"x" * (i % 7) + str(i).encode() for i in range(1000)]
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"\n".join(texts) + b"\ntail")
    fd = os.open(path, os.O_RDONLY)
    try:
        lines = LineFile(fd)
        assert len(lines) == 1000
        order = [*range(1000), *range(999, -1, -1), *range(0, 1000, 97), 500, 64, 63, 128]
        assert [lines.line(i) for i in order] == [texts[i] for i in order]
        assert lines.tail() == (b"tail", 4)
    finally:
        os.close(fd)
