"""``RunState.from_json``: a RunState or a ``RunStateError``, nothing else.

Half the inputs are the bytes as the text; half are a sound paused state (with a
child) whose body is edited at random places with values of any shape (deep
nesting, huge numbers, unknown fields, lone surrogates), then wrapped in an
envelope whose digest is right most of the time, so the schema checks behind the
digest are reached. Whatever decodes must encode again to text that decodes to
the same state, and answering its pending calls raises nothing but
``RunStateError``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

from agentcore import (
    BackgroundChild,
    CallStatus,
    EndReason,
    Message,
    PendingCall,
    RunState,
    RunStateError,
    RunSummary,
    ToolCall,
    Usage,
)
from agentcore._run._state import Phase

from ._bytes import ByteReader
from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (RunStateError,)


def _sound() -> RunState:
    call = ToolCall("c2", "write", '{"s": 1}')
    state = RunState.begin(
        [Message("user", "go"), Message("assistant", "", tool_calls=[call])],
        run_id="r1", agent="worker", path=("root/0001",), input="go",
    )
    state.turn, state.tool_calls = 1, 1
    state.usage = Usage(3, 2, cost=0.5)
    state.pending = [PendingCall(call, CallStatus.deferred, "ask")]
    state.summary = RunSummary(1, 1, 0, 0, state.usage, EndReason.paused, None, 1.0)
    state.phase = Phase.ended
    return state


def _ended_background() -> RunState:
    # A background child that ended, its result kept for delivery (issue 20).
    state = RunState.begin([], run_id="r3", agent="bg", path=("root/0001", "bg/0003"),
                           input="work")
    state.phase = Phase.ended
    state.summary = RunSummary(1, 0, 0, 0, Usage(1, 1), EndReason.stop, None, 1.0)
    state.background = BackgroundChild("c9", "bg", "[subagent result] {}", "out", None)
    return state


_ROOT = _sound()
_ROOT.children.append(_sound())
_PAUSED_BACKGROUND = _sound()
_PAUSED_BACKGROUND.background = BackgroundChild("c8", "bg")
_ROOT.children.extend([_PAUSED_BACKGROUND, _ended_background()])
_TEXT = _ROOT.to_json()
_BODY: dict[str, Any] = json.loads(_TEXT)["state"]
_KEYS = (*_BODY, "role", "content", "tool_calls", "status", "call", "id", "name",
         "arguments", "input_tokens", "cost", "end_reason", "extra", "background",
         "call_id", "result", "output", "error")


def _value(r: ByteReader, depth: int) -> Any:
    kind = r.below(8 if depth < 5 else 4)
    if kind == 0:
        return r.text()
    if kind == 1:
        return r.number()
    if kind == 2:
        return r.choice((True, False, None, 10**400, "paused", "deferred", "tool"))
    if kind == 3:
        return "[" * r.below(3) and [[[]]] * r.below(3)
    if kind in (4, 5):
        return {r.choice(_KEYS): _value(r, depth + 1) for _ in range(r.below(4))}
    if kind == 6:
        return json.loads(json.dumps(_BODY))
    return [_value(r, depth + 1) for _ in range(r.below(4))]


def _edit(r: ByteReader, node: Any, depth: int) -> Any:
    # Replace, drop or add at random places of the sound body.
    if isinstance(node, dict) and node and depth < 8:
        key = r.choice(sorted(node))
        how = r.below(4)
        if how == 0:
            node[key] = _value(r, 1)
        elif how == 1:
            del node[key]
        elif how == 2:
            node[r.choice(_KEYS)] = _value(r, 1)
        else:
            node[key] = _edit(r, node[key], depth + 1)
    elif isinstance(node, list) and node and depth < 8:
        k = r.below(len(node))
        node[k] = _edit(r, node[k], depth + 1) if r.below(2) else _value(r, 1)
    elif r.below(2):
        return _value(r, 1)
    return node


def _text(r: ByteReader, data: bytes) -> str | bytes:
    if r.below(2):
        return data[1:] if r.below(2) else data[1:].decode("utf-8", "surrogateescape")
    body = json.loads(json.dumps(_BODY))
    for _ in range(1 + r.below(4)):
        body = _edit(r, body, 0)
    if r.below(4) == 0:
        body = {"children": [body] * (1 + r.below(3))} | _BODY if r.below(2) else body
    raw = json.dumps(body, separators=(",", ":")).encode("utf-8", "surrogatepass")
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    if r.below(8) == 0:
        digest = digest[:-1] + "0"
    version = r.choice((1, 2)) if r.below(8) else r.choice((0, 3, -1, 10**30))
    head = json.dumps({"format": "agentcore.RunState", "version": version, "digest": digest})
    return head[:-1].encode() + b',"state":' + raw + b"}"


def target(data: bytes) -> None:
    r = ByteReader(data)
    text = _text(r, data)
    state = RunState.from_json(text)
    again = RunState.from_json(state.to_json())
    assert again.to_json() == state.to_json()
    for approval in state.pending_approvals:
        with contextlib.suppress(RunStateError):
            state.approve(approval.call_id, path=approval.path)


if __name__ == "__main__":
    main(target, ALLOWED)
