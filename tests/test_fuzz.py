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
]


@pytest.mark.parametrize("name", HARNESSES)
def test_harness_finds_nothing(name: str) -> None:
    module = importlib.import_module(name)
    assert run_hypothesis(module.target, module.ALLOWED, max_examples=300) == 300
