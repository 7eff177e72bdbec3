"""The documentation site (issue 34): its API reference lists exactly the public names
of each package, and its pages are all in the site's navigation.

The reference pages are derived from the public names: after a name is added or
removed on purpose, ``python -m tests.test_docs`` writes them again. ``mkdocs build
--strict`` (in .ci/run) checks links and renders the docstrings; the code blocks run
in tests/test_readme.py.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: module -> (page under docs/reference/, what the module holds)
REFERENCE: dict[str, tuple[str, str]] = {
    "subagent": (
        "subagent.md",
        "The pool, its specs, tasks and results, event streams, budgets, checkpoints "
        "and the delegation tools.",
    ),
    "agentcore": (
        "agentcore.md",
        "One agent run: messages, the model and tool protocols, `@tool`, gates, hooks, "
        "the run's state and result.",
    ),
    "ledger": (
        "ledger.md",
        "The audit trail: records, hash-chained entries, sinks, redaction and "
        "verification.",
    ),
    "agentcore.models": (
        "models.md",
        "Model adapters (OpenAI, Anthropic), fallback, shared rate limits, prices.",
    ),
    "agentcore.testing": (
        "agentcore-testing.md",
        "Deterministic models and tools for tests.",
    ),
    "agentcore.lowlevel": (
        "agentcore-lowlevel.md",
        "Plumbing for code that builds on agentcore: the tool call running now, checkpoint "
        "helpers.",
    ),
    "agentcore.limits": ("agentcore-limits.md", "agentcore's bounds on hostile input."),
    "subagent.limits": ("subagent-limits.md", "subagent's bounds on hostile input."),
    "ledger.encoding": (
        "ledger-encoding.md",
        "The ledger's canonical encoding, for tools that read or write ledgers without a sink.",
    ),
    "subagent.mcp": ("mcp.md", "MCP servers as tool sources of a pool."),
    "subagent.temporal": (
        "temporal.md",
        "Root tasks as Temporal workflows, workers, approvals and admission.",
    ),
    "subagent.otel": ("otel.md", "OpenTelemetry spans for a pool's tasks, model and tool calls."),
    "subagent.tools": ("tools.md", "Workspace tools: read_file, list_dir, grep, write_file."),
    "subagent.serve": ("serve.md", "The pool over HTTP, with a web page."),
    "subagent.aio": ("aio.md", "The pool from asyncio code, on a trio guest run."),
    "subagent.testing": (
        "subagent-testing.md",
        "The public test kit: scripted workloads and the event-log checker.",
    ),
}


def public_names(module: str) -> list[str]:
    """The public names of ``module``: as tests/test_public_names.py lists them, else
    (a plain module such as ``agentcore.testing``) the names it defines at its top
    level that do not start with ``_``."""
    from tests.test_public_names import PUBLIC

    if module in PUBLIC:
        return PUBLIC[module]
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return sorted(name for name in names if not name.startswith("_"))


def reference_page(module: str) -> str:
    """The reference page of ``module``, as this module writes it."""
    _, about = REFERENCE[module]
    members = "".join(f"        - {name}\n" for name in public_names(module))
    return (
        f"# `{module}`\n\n{about}\n\n"
        f"::: {module}\n    options:\n      show_root_heading: false\n"
        f"      members:\n{members}"
    )


@pytest.mark.parametrize("module", sorted(REFERENCE))
def test_reference_page_lists_the_public_names(module: str) -> None:
    page = DOCS / "reference" / REFERENCE[module][0]
    assert page.read_text() == reference_page(module), "run python -m tests.test_docs"


def test_every_package_with_public_names_has_a_page() -> None:
    from tests.test_public_names import PUBLIC

    assert set(PUBLIC) <= set(REFERENCE)


def _nav_pages(text: str) -> set[str]:
    return set(re.findall(r"^\s*- (?:[^:\n]+: )?\"?([\w/.-]+\.md)\"?$", text, re.M))


def test_every_page_is_in_the_navigation() -> None:
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    nav = _nav_pages((ROOT / "mkdocs.yml").read_text())
    assert pages == nav


if __name__ == "__main__":
    for name, (file, _) in REFERENCE.items():
        (DOCS / "reference" / file).write_text(reference_page(name))
