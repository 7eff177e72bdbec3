from __future__ import annotations

import ast
from pathlib import Path

import ledger

PURE = ("_entry", "_encoding", "_chain", "_check", "_redact", "_verify", "_query")
ROOT = Path(ledger.__file__).parent


def imports_of(module: str) -> set[str]:
    """The modules ``ledger.<module>`` imports: ledger-relative ones as ``.name``."""
    tree = ast.parse((ROOT / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level and node.module:
                found.add(f".{node.module}")
            elif node.level:
                found |= {f".{alias.name}" for alias in node.names}
            elif node.module:
                found.add(node.module.split(".")[0])
    return found


def test_pure_core_does_not_import_trio() -> None:
    seen: set[str] = set()
    todo = list(PURE)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        for name in imports_of(module):
            assert name != "trio", f"ledger.{module} imports trio"
            if name.startswith("."):
                todo.append(name[1:])
    assert {"_jsonl", "_memory", "_sqlite"}.isdisjoint(seen)
