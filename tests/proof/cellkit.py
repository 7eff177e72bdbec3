"""What every cell of the peer fault matrix checks: a bystander agent in the same pool
finishes, the ledger is a whole chain, and the process's file descriptors and memory
come back to their level once the pool is closed."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import itertools
import os
from collections.abc import Callable

from agentcore import Message
from agentcore.testing import ScriptedModel
from ledger import MemorySink
from subagent import Pool, Spec

MEMORY_SLACK = 6 * 1024 * 1024
"""Resident memory a cell may leave behind once its peer's code is loaded: 6 MiB. A
whole matrix run (issue 33; measured after ``malloc_trim``) left at most 1.5 MiB (the
second MCP stdio cell), all other cells under 0.6 MiB and most under 0.1 MiB; a cell
that leaks 10 MiB fails (``tests/proof/test_cellkit.py``)."""

FIRST_CELL_SLACK = 64 * 1024 * 1024
"""The same for the first cell of a peer in the process, which also loads the peer's
code and warms its caches: 64 MiB (measured: 22 MiB for the first MCP stdio cell, the
``mcp`` SDK and anyio; 15 MiB for the Temporal cell, the only one of its peer; under
4 MiB for the others)."""

_warm: set[str] = set()

# glibc's: give the heap's free memory back before measuring (another C library's
# malloc keeps what it keeps, within the slack).
_trim = getattr(ctypes.CDLL(None), "malloc_trim", None)


def open_fds() -> int:
    """The process's open file descriptors."""
    return len(os.listdir("/proc/self/fd"))


def fd_targets() -> set[str]:
    """What the process's open file descriptors point at (``fd -> target``), to name
    those a cell left open or closed."""
    targets = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own, closed since
            targets.add(f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}")
    return targets


def resident() -> int:
    """The process's resident memory in bytes, after the heap's free memory is given
    back to the system where the C library can (glibc's ``malloc_trim``)."""
    if _trim is not None:
        _trim(0)
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def check_levels(run: Callable[[], None], peer: str) -> None:
    """Run ``run`` (a whole cell of ``peer``: its pool opened and closed), then check
    that the open file descriptors are back to their level and that the resident
    memory grew by less than :data:`MEMORY_SLACK` (:data:`FIRST_CELL_SLACK` for the
    first cell of ``peer`` in this process)."""
    slack = MEMORY_SLACK if peer in _warm else FIRST_CELL_SLACK
    _warm.add(peer)
    gc.collect()
    fds, before, memory = open_fds(), fd_targets(), resident()
    run()
    gc.collect()
    if open_fds() != fds:
        after = fd_targets()
        raise AssertionError(f"{peer}: file descriptors left open {sorted(after - before)}, "
                             f"closed {sorted(before - after)}")
    grown = resident() - memory
    assert grown < slack, f"{peer}: {grown} bytes of resident memory left behind"


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

