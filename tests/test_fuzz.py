"""CI runs every fuzz harness for a short budget under hypothesis."""

from __future__ import annotations

import importlib

import pytest

from fuzz._runner import run_hypothesis

HARNESSES = [
    "fuzz.fuzz_sse",
    "fuzz.fuzz_model_responses",
    "fuzz.fuzz_ledger_verify",
    "fuzz.fuzz_subagent_tool",
    "fuzz.fuzz_spec_file",
    "fuzz.fuzz_workspace",
    "fuzz.fuzz_redact",
    "fuzz.fuzz_typed_tool",
    "fuzz.fuzz_run_state",
    "fuzz.fuzz_history",
    "fuzz.fuzz_temporal_wire",
    "fuzz.fuzz_output_schema",
    "fuzz.fuzz_checkpoints",
    "fuzz.fuzz_mcp_stdio",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", HARNESSES)
def test_harness_finds_nothing(name: str) -> None:
    module = importlib.import_module(name)
    assert run_hypothesis(module.target, module.ALLOWED, max_examples=300) == 300


def test_seconds_budget_stops_the_hypothesis_engine() -> None:
    # The bug: with --seconds under hypothesis, inputs past the budget were skipped
    # but still generated, up to max_examples=10**9, so the run never ended.
    ran = run_hypothesis(lambda data: None, (), max_examples=10**9, seconds=0.1, batch=50)
    assert 0 < ran < 10**9
    assert ran % 50 == 0
