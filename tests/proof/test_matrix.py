"""The peer fault matrix's shape (issue 33): every peer x fault x moment is either run
by a test module or has a footnoted reason, and the counts are stated here."""

from __future__ import annotations

from .matrix import FAULTS, GRIDS, MOMENTS, PEERS, REASONS, cells, parse

#: Cells run, by peer: a change to a grid must change this table too.
RUN = {
    "openai": 14, "anthropic": 14, "mcp_stdio": 13, "mcp_http": 9, "mcp_client": 7,
    "jsonl_sink": 6, "sqlite_sink": 9, "checkpoints": 8, "temporal": 7,
}


def test_the_matrix_is_complete() -> None:
    assert set(GRIDS) == set(PEERS)
    total = 0
    for peer in PEERS:
        grid = parse(GRIDS[peer])
        assert len(grid) == len(FAULTS) * len(MOMENTS)
        assert {mark for mark in grid.values() if mark != "X"} <= set(REASONS)
        assert len(cells(peer)) == RUN[peer], peer
        total += len(grid)
    assert total == 9 * 8 * 5 == 360
    assert len(cells()) == sum(RUN.values())
