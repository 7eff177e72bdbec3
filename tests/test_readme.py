"""The README's two commands (CI runs exactly the second), and every code block of the
README and of docs/ that is meant to run.

A ```python block runs as a script, in a subprocess, and must exit 0 (using a
deprecated name of ours fails it); a ```py block is shown only (a fragment, or code
that needs a server); ```sh, ```toml and ```text blocks are not run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text)


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.+?)\n```$", page.read_text(), re.S | re.M)


def test_readme_starts_with_the_two_commands() -> None:
    commands = readme_commands()
    assert len(commands) >= 2
    assert commands[0].startswith("python3 -m venv .venv && ")
    assert "demo" in commands[0] or "examples/" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == readme_commands()[1]


def test_the_readme_and_the_guides_have_examples_that_run() -> None:
    assert len(python_blocks(ROOT / "README.md")) >= 2
    assert sum(len(python_blocks(page)) for page in PAGES) >= 10


def test_every_fence_is_closed_on_its_own_line() -> None:
    # A closing fence with text after it is no fence: the block would run on.
    for page in PAGES:
        fences = re.findall(r"^```.*$", page.read_text(), re.M)
        assert len(fences) % 2 == 0, page
        assert all(f == "```" for f in fences[1::2]), (page, fences[1::2])


EXAMPLES = [
    pytest.param(block, id=f"{page.relative_to(ROOT)}-{i}")
    for page in PAGES
    for i, block in enumerate(python_blocks(page))
]


@pytest.mark.slow
@pytest.mark.parametrize("block", EXAMPLES)
def test_python_examples_run(block: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block)
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning:__main__", str(script)],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )
    assert done.returncode == 0, (block, done.stderr)
