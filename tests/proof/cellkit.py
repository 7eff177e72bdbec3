"""What every cell of the peer fault matrix checks: a bystander agent in the same pool
finishes, the ledger is a whole chain, and the process's file descriptors and memory
come back to their level once the pool is closed."""

from __future__ import annotations

import gc
import itertools
import os
from collections.abc import Callable

from agentcore import Message
from agentcore.testing import ScriptedModel
from ledger import MemorySink
from subagent import Pool, Spec

#: Coarse: resident memory a cell may leave behind (sockets, buffers, caches warmed).
MEMORY_SLACK = 64 * 1024 * 1024


def open_fds() -> int:
    """The process's open file descriptors."""
    return len(os.listdir("/proc/self/fd"))


def resident() -> int:
    """The process's resident memory in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def check_levels(run: Callable[[], None]) -> None:
    """Run ``run`` (a whole cell: its pool opened and closed), then check that the open
    file descriptors are back to their level and memory is about the same."""
    gc.collect()
    fds, memory = open_fds(), resident()
    run()
    gc.collect()
    assert open_fds() == fds
    assert resident() - memory < MEMORY_SLACK


def register_bystander(pool: Pool, sink: MemorySink) -> None:
    """A second agent of the pool, with no peer: it must finish whatever the peer does."""
    pool.register(Spec("bystander", model=ScriptedModel([Message("assistant", "unaffected")]),
                       audit=sink))


async def bystander_finishes(pool: Pool) -> None:
    """Submit the bystander and check that it finishes. A checkpoint."""
    result = await (await pool.submit("bystander", "go on")).wait()
    assert result.output == "unaffected"


def check_ledger(sink: MemorySink) -> None:
    """Nothing acknowledged is lost: entries numbered 1..n, each chained to the one
    before, and the bystander's run ended in it."""
    entries = sink.entries
    assert [entry.seq for entry in entries] == list(range(1, len(entries) + 1))
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(entries))
    assert any(e.kind == "task_finished" and e.agent_id == "bystander" for e in entries)

