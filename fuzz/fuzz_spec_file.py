"""The TOML specs loader: a ``SpecFile`` or a ``SpecFileError``, nothing else.

Half the inputs are the bytes as the file; half are TOML documents built from the
bytes (the real tables and fields with values of every TOML type, plus unknown
ones), so validation past the TOML parser is reached too. Whatever the loader
accepts, ``open_pool`` accepts as pool settings.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any

import trio

from subagent import open_pool
from subagent._declarative import AGENT_KEYS, POOL_KEYS, SpecFileError, load_specs

from ._bytes import ByteReader
from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (SpecFileError,)
_DIR = tempfile.mkdtemp(prefix="fuzz-specs-")
_FILE = os.path.join(_DIR, "agents.toml")
with open(os.path.join(_DIR, "replay.json"), "w", encoding="utf-8") as _replay:
    _replay.write('[{"content": "hi"}]')

MODELS = ("scripted:replay.json", "scripted:missing.json", "openai:gpt-x", "anthropic:c",
          "nope:x", "openai:", "scripted:\x00", "")
TOOLS = ("subagent", "read_file", "grep", "list_dir", "write_file", "nope", "subagent")


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"


def _field_value(reader: ByteReader, key: str) -> Any:
    kind = reader.below(10)
    if kind >= 6:
        # A value of the right type most of the time, so whole files get accepted.
        if key == "tools":
            return ["subagent"]
        if key in ("description", "system_prompt", "agent_id"):
            return "x"
        if key in ("model",):
            return MODELS[0]
        return reader.choice((1, 2, 4, 30.0, 0.5, False))
    if kind == 0:
        return reader.number()
    if kind == 1:
        return reader.text()
    if kind == 2:
        return reader.choice((True, False))
    if kind == 3:
        return [reader.choice(TOOLS) for _ in range(reader.below(4))]
    if kind == 4:
        return reader.choice(MODELS) if "model" in key else reader.number()
    return {reader.text(): reader.number()}


def document(data: bytes) -> str:
    """A TOML document of tables and fields drawn from ``data``."""
    reader = ByteReader(data)
    lines: list[str] = []

    def table(header: str, keys: tuple[str, ...], fields: dict[str, Any]) -> None:
        for _ in range(reader.below(5)):
            key = reader.choice(keys)
            fields[key] = _field_value(reader, key)
        lines.append(header)
        lines.extend(f"{json.dumps(key)} = {_toml(value)}" for key, value in fields.items())

    if reader.below(2):
        table("[pool]", (*POOL_KEYS, "bogus"), {})
    if reader.below(2):
        table("[defaults]", ("model", "agent_id", "gate"), {})
    names = {reader.choice(("w", "boss", "a/b", "", "x y")) for _ in range(reader.below(4))}
    for name in sorted(names):
        # Mostly well-formed agents (a model that resolves), so later checks are reached.
        fields: dict[str, Any] = {"model": MODELS[0]} if reader.below(4) else {}
        table(f"[agents.{json.dumps(name)}]", (*sorted(AGENT_KEYS), "bogus"), fields)
    if reader.below(8) == 0:
        lines.append(f"agents = {_toml(reader.number())}")
    return "\n".join(lines) + "\n"


def target(data: bytes) -> None:
    raw = data[1:] if data[:1] == b"R" else document(data).encode("utf-8", "surrogatepass")
    with open(_FILE, "wb") as f:
        f.write(raw)
    workspace = _DIR if data[-1:] == b"W" else None
    specs = load_specs(_FILE, workspace=workspace)
    assert specs.specs, specs

    async def check_pool() -> None:
        async with open_pool(**specs.pool):  # type: ignore[arg-type]
            pass

    trio.run(check_pool)


if __name__ == "__main__":
    main(target, ALLOWED)
