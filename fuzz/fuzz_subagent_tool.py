"""SubagentTool arguments: the tool's JSON output or a ``SubagentError``, nothing else.

Every input runs the tool's ``execute`` in a pool with one registered agent ``w``:
half the inputs are the bytes as argument text, half are JSON objects built from
the bytes (known and unknown keys, values of every JSON type), so the checks past
"is it JSON" are reached too.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from agentcore.testing import ScriptedModel
from subagent import Spec, SubagentError, SubagentTool, open_pool

from ._bytes import ByteReader
from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (SubagentError,)
KEYS = ("agent", "task", "wait", "extra", "")


def _value(reader: ByteReader, depth: int = 0) -> Any:
    kind = reader.below(7 if depth < 2 else 5)
    if kind == 0:
        return reader.choice(("w", "nope", "", "W"))
    if kind == 1:
        return reader.text()
    if kind == 2:
        return reader.number() if reader.below(2) else reader.choice((True, False))
    if kind == 3:
        return None
    if kind == 4:
        return reader.choice(("do it", "  ", "\n"))
    if kind == 5:
        return [_value(reader, depth + 1) for _ in range(reader.below(3))]
    return {reader.text(): _value(reader, depth + 1) for _ in range(reader.below(3))}


def arguments(data: bytes) -> str:
    """The argument text an input stands for."""
    reader = ByteReader(data)
    if reader.below(2):
        return data[1:].decode("utf-8", "replace")
    value: dict[str, Any] = {}
    if reader.below(2):
        # A valid call with a few of its parts changed, so success is reached often.
        value = {"agent": "w", "task": "do it"}
        if reader.below(2):
            value["wait"] = reader.choice((True, False))
    for _ in range(reader.below(3)):
        key = reader.choice(KEYS)
        if reader.below(4) == 0:
            value.pop(key, None)
        else:
            value[key] = _value(reader)
    if reader.below(8) == 0:
        return json.dumps(_value(reader), allow_nan=True)
    return json.dumps(value, allow_nan=True)


def target(data: bytes) -> None:
    text = arguments(data)

    async def run() -> None:
        async with open_pool(max_concurrent=2) as pool:
            pool.register(Spec("w", model=ScriptedModel(lambda request: "answer")))
            output = await SubagentTool(pool).execute(text)
        value = json.loads(output)
        assert isinstance(value, dict) and value.get("agent") == "w", output

    trio.run(run)


if __name__ == "__main__":
    main(target, ALLOWED)
