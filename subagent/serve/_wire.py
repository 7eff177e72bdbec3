"""How the server shows things on the wire: a pool :class:`subagent.Event`, a usage
and a paused call as JSON-ready dicts.

Every text a model or a tool wrote is kept as text (the page inserts it with
``textContent``), clipped to :data:`MAX_FIELD_CHARS` so one event's size is bounded.
"""

from __future__ import annotations

from typing import Any

import agentcore
import subagent

#: The most characters of one text field of an event on the wire (the rest is cut,
#: and the cut said).
MAX_FIELD_CHARS = 4096


def clip(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    """``text``, cut to ``limit`` characters with the cut said. Not a checkpoint."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"... ({len(text)} characters)"


def usage(value: agentcore.Usage) -> dict[str, Any]:
    """A usage as ``{input_tokens, output_tokens, cost}`` (``cost`` null: unknown)."""
    return {"input_tokens": value.input_tokens, "output_tokens": value.output_tokens,
            "cost": value.cost}


def _call(call: agentcore.ToolCall) -> dict[str, Any]:
    return {"id": clip(call.id, 200), "name": clip(call.name, 200),
            "arguments": clip(call.arguments)}


def event(ev: subagent.Event) -> dict[str, Any]:
    """The wire form of one pool event: its AgentPath and kind always, the other
    fields when set. Not a checkpoint."""
    out: dict[str, Any] = {"path": list(ev.path), "kind": str(ev.kind), "time": ev.time}
    if ev.call_id is not None:
        out["call_id"] = clip(ev.call_id, 200)
    if ev.error is not None:
        out["error"] = clip(ev.error)
    if ev.output is not None:
        out["output"] = clip(ev.output)
    if ev.child is not None:
        out["child"] = list(ev.child)
    if ev.summary is not None:
        out["summary"] = {"end_reason": str(ev.summary.end_reason), "turns": ev.summary.turns,
                          "usage": usage(ev.summary.usage)}
    if ev.tree_usage is not None:
        out["tree_usage"] = usage(ev.tree_usage)
    if ev.budget is not None:
        out["budget"] = clip(ev.budget.message())
    inner = ev.event
    if inner is not None:
        out["turn"] = inner.turn
        if inner.text:
            out["text"] = clip(inner.text)
        if inner.message is not None:
            out["message"] = {"role": inner.message.role, "content": clip(inner.message.content),
                              "tool_calls": [_call(c) for c in inner.message.tool_calls[:32]]}
        if inner.call is not None:
            out["call"] = _call(inner.call)
        if inner.decision is not None:
            out["decision"] = {"allowed": inner.decision.allowed,
                               "deferred": inner.decision.deferred,
                               "reason": clip(inner.decision.reason)}
        if inner.is_error:
            out["is_error"] = True
        if inner.usage is not None:
            out["usage"] = usage(inner.usage)
    return out


def approval(tree: str, agent: str, p: agentcore.PendingApproval) -> dict[str, Any]:
    """A call waiting for a human, whole (its arguments are not clipped: the page shows
    the exact call that an approval runs)."""
    return {"tree": tree, "agent": agent, "path": list(p.path), "call_id": p.call_id,
            "tool": p.tool, "arguments": p.arguments, "reason": p.reason}
