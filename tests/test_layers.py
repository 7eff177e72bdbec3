"""The import rules between the packages (issue 34), checked.

A *unit* is a sub-package (``subagent._pool``, ``agentcore._run``, ``subagent.mcp``...)
or a module at a package's top level (``subagent._errors``). Each package lists its
units bottom to top below; a unit imports at run time only units listed before it
(never one after it, so no two units import each other). Imports under ``if
TYPE_CHECKING:`` are annotations, not dependencies, and are not restricted. Across
packages: ledger imports neither agentcore nor subagent; agentcore does not import
subagent. A new unit fails this test until it is given its place here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ORDER: dict[str, list[str]] = {
    "agentcore": [
        # leaf values
        "_errors", "_messages", "_fastpath", "_hookset", "_spent", "_summary", "_history",
        "_models", "_retry", "_audit",
        "_tools",  # defining tools and gates
        "_events", "_steering", "_hooks",
        "models", "testing",  # model adapters, the scripted test model
        "_run",  # one run: the loop, model and tool calls, state, pause and resume
        "lowlevel", "limits",  # public: plumbing, bounds
        "_agent", "__init__",
    ],
    "subagent": [
        # leaf values every part uses
        "_errors", "_safe_text", "_events", "_current", "_stream", "_reply", "_ledgerfile",
        "_core", "_result",  # the pool's sans-IO rules; a task's result
        "tools", "mcp",  # workspace tools; MCP servers as tools (client side)
        "_cost",  # budgets
        "_specs",  # Spec, specs files, history input, output schemas
        "_durable",  # checkpoints, recovery, resume claims
        "limits",  # public: the bounds
        "_delegation",  # the delegation tools, background children
        "_pool",  # the trio shell: Pool, Task, a task's life, open_pool
        "otel", "testing", "__init__", "temporal",
        "serve",  # the pool over HTTP: public names of subagent only
        "aio",  # the pool from asyncio code (trio guest mode): public names only
        "_cli", "__main__",  # the command line
    ],
}
# what a package may import of the others
ALLOWED = {"ledger": set(), "agentcore": {"ledger"}, "subagent": {"ledger", "agentcore"}}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_imports(path: Path) -> set[str]:
    return _imports_in(path.read_text(), _module(path), path.name == "__init__.py")


def _imports_in(source: str, me: str, is_package: bool) -> set[str]:
    """Absolute names of the modules module ``me`` imports outside ``if TYPE_CHECKING:``
    (module level or inside functions: both run)."""
    pkg = me if is_package else me.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for stmt in child.orelse:
                    visit(stmt)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = pkg.split(".")[: len(pkg.split(".")) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                found.update(f"{base}.{alias.name}" for alias in child.names)
                found.add(base)
            visit(child)

    visit(ast.parse(source))
    return found


def _unit(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] not in ORDER:
        return None
    return "__init__" if len(parts) == 1 else parts[1]


def _edges(package: str) -> set[tuple[str, str, str]]:
    """(importing unit, imported unit, importing module) within ``package``."""
    edges = set()
    for path in (ROOT / package).rglob("*.py"):
        me = _module(path)
        mine = _unit(me)
        assert mine is not None
        for name in _runtime_imports(path):
            if name.split(".")[0] != package:
                continue
            # ``from pkg import name`` adds "pkg.name" and "pkg": a name that is not a
            # module of the package is a name of ``pkg`` itself
            other = _unit(name)
            if other is None or other == mine:
                continue
            if not _exists(name):
                continue
            edges.add((mine, other, me))
    return edges


def _exists(name: str) -> bool:
    p = ROOT.joinpath(*name.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


@pytest.mark.parametrize("package", sorted(ORDER))
def test_every_unit_has_its_place(package: str) -> None:
    units = {
        "__init__" if p.name == "__init__.py" else p.stem
        for p in (ROOT / package).iterdir()
        if (p.suffix == ".py") or (p / "__init__.py").exists()
    }
    assert units == set(ORDER[package])


@pytest.mark.parametrize("package", sorted(ORDER))
def test_units_import_only_units_below_them(package: str) -> None:
    rank = {unit: i for i, unit in enumerate(ORDER[package])}
    upward = sorted(
        f"{module} ({mine}) imports {other}"
        for mine, other, module in _edges(package)
        if rank[other] > rank[mine]
    )
    assert upward == []


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_packages_import_only_packages_below_them(package: str) -> None:
    others = set(ALLOWED) - {package}
    wrong = sorted(
        f"{_module(path)} imports {name}"
        for path in (ROOT / package).rglob("*.py")
        for name in _runtime_imports(path)
        if name.split(".")[0] in others - ALLOWED[package]
    )
    assert wrong == []


def test_the_check_sees_an_upward_import() -> None:
    # relative imports resolved from inside a sub-package; a function's import counts,
    # an annotations-only one does not
    source = (
        "from typing import TYPE_CHECKING\n"
        "from .._errors import SubagentError\n"
        "if TYPE_CHECKING:\n"
        "    from .._pool._task import Task\n"
        "def f():\n"
        "    from .._pool._pool import Pool\n"
    )
    found = _imports_in(source, "subagent._core._probe", is_package=False)
    assert {"subagent._errors", "subagent._pool._pool"} <= found
    assert "subagent._pool._task" not in found
    rank = {unit: i for i, unit in enumerate(ORDER["subagent"])}
    assert rank["_pool"] > rank["_core"]
