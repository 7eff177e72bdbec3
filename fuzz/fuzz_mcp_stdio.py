"""The stdio MCP framing (``subagent.mcp._framing``): chunking does not change the
lines ``Lines`` gives, no line past its limit is given, and on any bytes that parse as
JSON ``count_values`` is the documented count (never fewer values than the parser
makes). It raises nothing (``check_values`` only ``McpMessageError``)."""

from __future__ import annotations

import json
from typing import Any

from subagent.mcp._framing import Lines, McpMessageError, check_values, count_values

from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (McpMessageError,)


def _values(value: Any) -> int:
    if isinstance(value, list):
        return 1 + (sum(_values(v) for v in value) if value else 1)
    if isinstance(value, dict):
        return 1 + (sum(1 + _values(v) for v in value.values()) if value else 1)
    return 1


def _lines(data: bytes, step: int, limit: int) -> list[bytes | None]:
    lines = Lines(limit)
    chunks = [data[start:start + step] for start in range(0, len(data), step)]
    out = [line for chunk in chunks for line in lines.feed(chunk)]
    assert all(line is None or len(line) <= limit for line in out), (data, step, limit)
    return out


def target(data: bytes) -> None:
    if len(data) < 2:
        return
    step, limit, body = data[0] % 7 + 1, data[1] % 16 + 1, data[2:]
    assert _lines(body, step, limit) == _lines(body, len(body) or 1, limit)
    try:
        # As text: given bytes, json.loads would also read UTF-16 and UTF-32.
        text = body.decode("utf-8")
        value = json.loads(text, object_pairs_hook=lambda pairs: dict(enumerate(pairs)))
    except (ValueError, RecursionError):
        value = None
    else:
        # Duplicate keys are kept (the hook): each one is a key and a value.
        assert count_values(body, 10**9) == _values(_unpaired(value)), body
    count_values(body, data[0])
    check_values(body)


def _unpaired(value: Any) -> Any:
    if isinstance(value, list):
        return [_unpaired(v) for v in value]
    if isinstance(value, dict):
        return {k: _unpaired(v) for k, (_, v) in value.items()}
    return value


if __name__ == "__main__":
    main(target, ALLOWED)
