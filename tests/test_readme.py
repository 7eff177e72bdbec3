"""The README's two commands: CI runs exactly the second."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text)


def test_readme_starts_with_the_two_commands() -> None:
    commands = readme_commands()
    assert len(commands) >= 2
    assert commands[0].startswith("python3 -m venv .venv && ")
    assert "demo" in commands[0] or "examples/" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == readme_commands()[1]


@pytest.mark.slow
def test_python_examples_run(tmp_path: Path) -> None:
    import subprocess
    import sys

    blocks = re.findall(r"```python\n(.+?)\n```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) >= 2
    for i, block in enumerate(blocks):
        script = tmp_path / f"example_{i}.py"
        script.write_text(block)
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=60,
            check=False,
        )
        assert done.returncode == 0, (block, done.stderr)
