"""What crosses the Temporal workflow boundary: ``decode_event`` and ``last_heartbeat``.

Half the inputs are JSON objects built from the bytes with the real field names
(``path``, ``kind``, ``event``, ``summary``...) and values of every JSON shape, so
they reach the field checks behind the JSON parse; the other half are the bytes as
text, some behind up to 200 000 opening brackets. ``decode_event`` returns an event
that encodes and decodes to itself, or raises ``EventDecodeError``; ``last_heartbeat`` never raises.
The same text, and rows built from the bytes (with a sound state half the time), go
to ``start_state`` as a heartbeat's tree of checkpoints: rows whose states are sound
``RunState``s of their run, or ``CheckpointError``.
"""

from __future__ import annotations

import json
from typing import Any

from agentcore import Message, RunState
from subagent import CheckpointError
from subagent.temporal._errors import EventDecodeError
from subagent.temporal._resume import Heartbeat, last_heartbeat, start_state
from subagent.temporal._wire import decode_event, encode_event

from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (EventDecodeError,)

FIELDS = ("path", "kind", "event", "call_id", "summary", "error", "child", "output",
          "tree_usage", "stall", "run_id", "turn", "text", "message", "usage", "role",
          "content", "tool_calls", "input_tokens", "turns", "end_reason", "duration",
          "version", "attempt", "events", "state")  # fmt: skip
KINDS = ("agent_start", "turn_start", "tool_end", "task_finished", "task_queued",
         "event_loop_blocked", "nope", "")  # fmt: skip


def value(data: bytes, depth: int = 0) -> Any:
    if not data:
        return None
    head, rest = data[0], data[1:]
    choice = head % 9
    if choice == 0 or depth > 4:
        return KINDS[head % len(KINDS)]
    if choice == 1:
        return head - 128
    if choice == 2:
        return [value(rest[i:i + 3], depth + 1) for i in range(0, min(len(rest), 9), 3)]
    if choice == 3:
        return obj(rest, depth + 1)
    if choice == 4:
        return ["a/0001", "b/0002"][: head % 3]
    if choice == 5:
        return head % 2 == 0
    if choice == 6:
        return 10 ** (head % 30) + 0.5
    if choice == 7:
        return rest.decode("utf-8", "replace")
    return None


def obj(data: bytes, depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i in range(0, len(data), 4):
        chunk = data[i:i + 4]
        out[FIELDS[chunk[0] % len(FIELDS)]] = value(chunk[1:], depth)
    return out


SOUND = RunState.begin([Message("user", "go")], run_id="r", agent="a").to_json()


def rows(data: bytes) -> str:
    out = []
    for i in range(0, len(data), 8):
        chunk = data[i:i + 8]
        row = [value(chunk[j:j + 1]) for j in range(len(chunk))]
        if chunk[0] & 1:
            row = ["r", "a", None, None, ("running", "paused", "ended")[chunk[0] % 3],
                   chunk[0] - 64, [], SOUND if chunk[0] & 2 else value(chunk[1:])]
        out.append(row)
    return json.dumps(out)


def resume_from(text: str) -> None:
    try:
        found = start_state(Heartbeat(2, 0, 0, text))
    except CheckpointError:
        return
    assert found is not None
    for row in found:
        assert row.state is not None and row.state.run_id == row.run_id


def target(data: bytes) -> None:
    resume_from(rows(data))
    if data[:1] and data[0] & 1:
        built = obj(data[1:])
        text = json.dumps(built)
        last_heartbeat([built])
    elif data[:1] and data[0] & 2:
        depth = int.from_bytes(data[1:4] or b"\0", "big") % 200_000
        text = "[" * depth + data[4:].decode("utf-8", "replace")
        last_heartbeat([text])
    else:
        text = data[1:].decode("utf-8", "replace")
        last_heartbeat([text])
    resume_from(text)
    event = decode_event(text)
    assert decode_event(encode_event(event)) == event


if __name__ == "__main__":
    main(target, ALLOWED)
