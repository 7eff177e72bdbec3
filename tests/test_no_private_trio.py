"""The library uses trio's public API only (issue 34): no module of ``agentcore``,
``ledger`` or ``subagent`` imports ``trio._core`` (or any private trio module) or reads
a private attribute of trio's tasks, cancel scopes, cancel statuses, nurseries or
runner. A trio release can change those without notice."""

from __future__ import annotations

import re
from pathlib import Path

import trio
from trio._core import _run  # the test reads trio's private names to look for them

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agentcore", "ledger", "subagent")


def _sources() -> dict[Path, str]:
    return {
        path: path.read_text(encoding="utf-8")
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def _private_names() -> set[str]:
    # The underscore fields and methods of trio's run-time classes.
    names: set[str] = set()
    for cls in (trio.CancelScope, trio.lowlevel.Task, trio.Nursery, _run.CancelStatus,
                _run.Runner):
        names.update(field.name for field in getattr(cls, "__attrs_attrs__", ()))
        names.update(vars(cls))
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def _own_names(sources: dict[Path, str]) -> set[str]:
    # Underscore names the project defines itself (self._x = ..., _x: T fields, def _x).
    own: set[str] = set()
    for text in sources.values():
        own.update(re.findall(r"\bself\.(_\w+)\s*(?::[^=\n]+)?=", text))
        own.update(re.findall(r"^\s+(_\w+)\s*:", text, re.M))
        own.update(re.findall(r"\bdef (_\w+)\(", text))
        own.update(re.findall(r"__slots__ = \(([^)]*)\)", text))
    return own


def test_no_module_imports_a_private_trio_module() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path, text in _sources().items()
        for number, line in enumerate(text.splitlines(), 1)
        if re.search(r"\btrio\._|\bfrom trio\._|\bimport trio\._", line)
    ]
    assert found == []


def test_no_module_reads_a_private_attribute_of_trio() -> None:
    sources = _sources()
    private = _private_names() - _own_names(sources)
    assert {"_cancel_status", "_cancel_points", "_cancel_called"} <= private
    pattern = re.compile(r"\.(" + "|".join(sorted(map(re.escape, private))) + r")\b")
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path, text in sources.items()
        for number, line in enumerate(text.splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []
