"""What every matrix cell checks of the process (issue 33): a cell that leaves a file
descriptor open or 10 MiB of memory behind fails; one that frees what it used passes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .cellkit import check_levels

MIB = 1024 * 1024


def test_a_cell_that_leaks_10_mib_fails() -> None:
    kept: list[bytes] = []
    check_levels(lambda: None, "leaky")  # a peer's first cell may load its code
    check_levels(lambda: None, "leaky")
    with pytest.raises(AssertionError, match=r"^leaky: \d+ bytes of resident memory left"):
        check_levels(lambda: kept.append(b"x" * (10 * MIB)), "leaky")  # b"x" * n: touched
    assert len(kept) == 1


def test_a_cell_that_frees_what_it_used_passes() -> None:
    def use() -> None:
        assert len(b"x" * (16 * MIB)) == 16 * MIB

    for _ in range(2):
        check_levels(use, "tidy")


def test_a_cell_that_leaves_a_file_open_fails(tmp_path: Path) -> None:
    opened: list[int] = []
    with pytest.raises(AssertionError):
        check_levels(lambda: opened.append(os.open(tmp_path, os.O_RDONLY)), "open")
    os.close(opened[0])
