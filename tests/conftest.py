"""Hypothesis profiles for every property test; pick one with HYPOTHESIS_PROFILE.

- ``ci`` (default): 200 examples per property, derandomized, so that a run of the
  suite is deterministic (SPEC 6): the same examples every time, here and in CI.
- ``long``: 2,000 random examples per property, for exploring; a failure it finds is
  replayed from hypothesis' example database and becomes a regression test.
"""

from __future__ import annotations

import os

import trio
from hypothesis import HealthCheck, settings

from agentcore.models import load_prices

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
