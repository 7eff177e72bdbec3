"""The specs loader: a ``SpecFile`` or a ``SpecFileError``, nothing else, and no hang.

The first byte picks the input: ``R``, the rest of the bytes as the file; otherwise,
by its value mod 4: 1, a document nested up to 50 000 deep (arrays, inline tables) or
holding an integer of thousands of digits; 2, a mapping given to
``specs_from_mapping`` (values of any type, huge integers, keys that are not
strings); else a TOML document built from the bytes (the real tables and fields with
values of every TOML type, plus unknown ones, budget tables too), so validation past
the TOML parser is reached too. Models include ``scripted:`` paths that are no small
regular file (``/dev/zero``, a FIFO, a symbolic link to it, a directory, a 16 MiB + 1 sparse file)
and one through ``..``: each bad one is refused without being read or waited on.
Whatever the loader accepts, ``open_pool`` accepts as pool settings.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any

import trio

from subagent import SpecFileError, load_specs, open_pool, specs_from_mapping
from subagent._specs._file import AGENT_KEYS, POOL_KEYS
from subagent._specs._limits import BUDGET_KEYS

from ._bytes import ByteReader
from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (SpecFileError,)
_DIR = tempfile.mkdtemp(prefix="fuzz-specs-")
_FILE = os.path.join(_DIR, "agents.toml")
with open(os.path.join(_DIR, "replay.json"), "w", encoding="utf-8") as _replay:
    _replay.write('[{"content": "hi"}]')
os.mkfifo(os.path.join(_DIR, "fifo"))
os.symlink(os.path.join(_DIR, "fifo"), os.path.join(_DIR, "link"))
os.mkdir(os.path.join(_DIR, "folder"))
with open(os.path.join(_DIR, "huge.json"), "wb") as _huge:
    _huge.truncate(16 * 1024 * 1024 + 1)

MODELS = ("scripted:replay.json", "scripted:missing.json", "openai:gpt-x", "anthropic:c",
          "nope:x", "openai:", "scripted:\x00", "", "scripted:/dev/zero", "scripted:fifo",
          "scripted:link", "scripted:folder", "scripted:huge.json",
          f"scripted:../{os.path.basename(_DIR)}/replay.json", "scripted:" + "x" * 5000)
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
    if key == "budget" and kind >= 3:
        # A budget table: its keys (and an unknown one) with values of every kind.
        keys = (*BUDGET_KEYS, "bogus")
        return {reader.choice(keys): _field_value(reader, "x") for _ in range(reader.below(4))}
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
        table("[pool]", (*POOL_KEYS, "budget", "bogus"), {})
    if reader.below(2):
        table("[defaults]", ("model", "agent_id", "gate", "budget"), {})
    names = {reader.choice(("w", "boss", "a/b", "", "x y")) for _ in range(reader.below(4))}
    for name in sorted(names):
        # Mostly well-formed agents (a model that resolves), so later checks are reached.
        fields: dict[str, Any] = {"model": MODELS[0]} if reader.below(4) else {}
        table(f"[agents.{json.dumps(name)}]", (*sorted(AGENT_KEYS), "bogus"), fields)
    if reader.below(8) == 0:
        lines.append(f"agents = {_toml(reader.number())}")
    return "\n".join(lines) + "\n"


def deep(data: bytes) -> str:
    """A document nested up to 50 000 deep, with an integer of up to 50 000 digits
    (cut to 8 000 characters), or a single agent on one of :data:`MODELS`."""
    reader = ByteReader(data)
    depth = reader.choice((10, 500, 2_000, 50_000)) + reader.below(100)
    opener = reader.choice(("[", "{a = ", "[{b = "))
    model = json.dumps(reader.choice(MODELS) if reader.below(2) else MODELS[0])
    if reader.below(4) == 0:
        return f"[agents.a]\nmodel = {model}\ntimeout = 1{'0' * depth}\n"[:8000]
    if reader.below(4) == 0:
        return f"[agents.a]\nmodel = {model}\n"
    return f"[agents.a]\nmodel = {model}\ndescription = {opener * depth}\n"


def mapping(data: bytes) -> dict[Any, Any]:
    """A mapping of agents whose values and keys may be of any type or size."""
    reader = ByteReader(data)
    odd: tuple[Any, ...] = (10**400, -(10**5000), 1.5, None, b"x", ["x"], {"x": {}}, 3, "x")
    agent: dict[Any, Any] = {"model": reader.choice(MODELS)}
    for _ in range(reader.below(4)):
        key = reader.choice((*sorted(AGENT_KEYS), 7, ("t",), "bogus"))
        agent[key] = reader.choice(odd) if reader.below(2) else _field_value(reader, str(key))
    top: dict[Any, Any] = {"agents": {reader.choice(("a", "b c", "")): agent}}
    if reader.below(3) == 0:
        top[reader.choice(("pool", "defaults", 1, "x"))] = reader.choice(odd)
    return top


def target(data: bytes) -> None:
    workspace = _DIR if data[-1:] == b"W" else None
    mode = data[0] % 4 if data and data[:1] != b"R" else 0
    if mode == 2:
        specs = specs_from_mapping(mapping(data[1:]), workspace=workspace, base_dir=_DIR)
    else:
        if data[:1] == b"R":
            raw = data[1:]
        else:
            text = deep(data[1:]) if mode == 1 else document(data)
            raw = text.encode("utf-8", "surrogatepass")
        with open(_FILE, "wb") as f:
            f.write(raw)
        specs = load_specs(_FILE, workspace=workspace)
    assert specs.specs, specs

    async def check_pool() -> None:
        async with open_pool(**specs.pool, budget=specs.budget):  # type: ignore[arg-type]
            pass

    trio.run(check_pool)


if __name__ == "__main__":
    main(target, ALLOWED)
