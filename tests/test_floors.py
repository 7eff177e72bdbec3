"""The version floors in pyproject.toml keep out the releases known to lack what the
project uses: each row names the last release that fails and the first that works
(found by installing the floors in a fresh venv and running the fast suite)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"

#: (where the requirement is: "dependencies" or an extra, name, last release that
#: fails, first release that works, what needs it)
NEEDED = [
    ("dependencies", "trio", "0.30.0", "0.31.0",
     "trio.Cancelled.source: the delegation tool tells a deadline's cancel by it"),
    ("dependencies", "msgspec", "0.18.5", "0.18.6",
     "msgspec.json.Encoder(order='sorted') in ledger/_fieldline.py"),
    ("dev", "jsonschema", "4.20.0", "4.21.0",
     "jsonschema's enum telling nested True/False from 1/0, the oracle of the enum tests"),
    ("dev", "hypothesis", "6.100.2", "6.100.3",
     "a lambda's source cached: the core state machine took over 10 minutes before"),
]


def _requirements(group: str) -> dict[str, Requirement]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    lines = (project["dependencies"] if group == "dependencies"
             else project["optional-dependencies"][group])
    reqs = [Requirement(line) for line in lines]
    return {r.name: r for r in reqs}


@pytest.mark.parametrize(("group", "name", "broken", "works", "why"), NEEDED)
def test_floor_keeps_out_the_release_that_lacks_what_we_use(
    group: str, name: str, broken: str, works: str, why: str
) -> None:
    spec = _requirements(group)[name].specifier
    assert not spec.contains(broken), f"{name} {broken} lacks {why}: raise the floor"
    assert spec.contains(works), f"{name} {works} should be allowed"
