"""Hypothesis profiles for every property test; pick one with HYPOTHESIS_PROFILE.

- ``ci`` (default): 200 examples per property, derandomized, so that a run of the
  suite is deterministic (SPEC 6): the same examples every time, here and in CI.
- ``long``: 2,000 random examples per property, for exploring; a failure it finds is
  replayed from hypothesis' example database and becomes a regression test.

The suite writes bytecode caches (``__pycache__``) whatever ``PYTHONDONTWRITEBYTECODE``
says: many tests start interpreters that import this package (command lines, servers,
the crash tests' explorers), and without the caches each compiles it again
(tests/subagent/test_cli.py and tests/ledger/test_cli.py in a fresh clone: 13.5 s of
CPU with the variable set, 10.2 s without).

``-n auto`` starts two workers a core (:func:`pytest_xdist_auto_num_workers`): most of
the suite's slow tests wait on other processes (real servers, killed children, dev
servers), not on the CPU, so two workers on two cores left them idle. A clean clone on
2 cores: 307 s with 2 workers (CPU 434 s), 220 s with 4 (CPU 382 s).
``PYTEST_XDIST_AUTO_NUM_WORKERS`` still sets the number.
"""

from __future__ import annotations

import os
import sys

# Before this package is imported, here and in every process the tests start.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import trio  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from agentcore.models import load_prices  # noqa: E402


def pytest_xdist_auto_num_workers(config: object) -> int | None:
    """The workers ``-n auto`` starts: two a core, unless
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` says (then xdist's own hook reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return 2 * (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                else os.cpu_count() or 1)

settings.register_profile(
    "base", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", settings.get_profile("base"), max_examples=200, derandomize=True, database=None
)
settings.register_profile("long", settings.get_profile("base"), max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The adapters load genai-prices' snapshot in a worker thread on their first call, and
# an autojump clock could jump over that real wait: load it once, before any test.
trio.run(load_prices)
