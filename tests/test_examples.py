"""Every script in ``examples/`` runs offline to exit 0 and prints what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

#: A line each example must print (its point, not its details).
EXPECTED = {
    "quickstart.py": "output: 2 + 40 = 42",
    "typed_tools.py": "output: Filed one high-severity finding.",
    "typed_reviewers.py": "- high: auth.py:42 SQL built by formatting",
    "aio_fastapi.py": 'answer: plan, using {"agent": "researcher", "path": ["lead/0001", '
                      '"researcher/0002"], "output": "notes on plan a trip"}',
}


def test_every_example_is_listed() -> None:
    assert sorted(p.name for p in EXAMPLES) == sorted(EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120,
        check=False, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert EXPECTED[script.name] in done.stdout.splitlines()


def test_typed_reviewers_shows_the_retry() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "typed_reviewers.py")],
        capture_output=True, text=True, timeout=120, check=True, cwd=ROOT,
    )
    assert done.stdout.splitlines()[:3] == [
        "  lead/security_reviewer: output_validation final_result: invalid arguments: "
        "Expected `int`, got `str` - at `$.findings[0].line`",
        "  lead/security_reviewer: output_validation ok",
        "  lead/style_reviewer: output_validation ok",
    ]
    assert "changes needed; 2 findings:" in done.stdout.splitlines()
