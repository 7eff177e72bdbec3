"""The benchmark runner keeps working: ``python -m bench --quick`` runs every workload.

Benchmarks are not tests: nothing here looks at a time, a rate or a ratio.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quick_bench_runs_every_workload() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for prefix in ("W1 fan-out", "W2 stream", "W3 cancel latency", "W4 memory", "W5 nesting"):
        assert sum(line.startswith(prefix) for line in lines) == 1, (prefix, out.stdout)
