"""The live tree of a pool's tasks: a pure model fed by events, and two renderers.

:class:`TreeView` keeps, per AgentPath, the task's status, latest activity, turns and
tokens. :func:`render_lines` draws it as indented plain text; :func:`render_rich` as a
``rich`` tree (the optional ``view`` extra).

Everything a model or a tool wrote (answers, tool names and arguments, error texts)
goes through :func:`subagent._safe_text.one_line` before the view keeps it, so no
line it returns or draws holds a control character or a terminal escape, and the
rich tree is made of ``Text`` objects, never of markup built from that text.
"""

from __future__ import annotations

from typing import Any

import attrs

from agentcore import EndReason
from agentcore import EventKind as K

from ._events import Event
from ._events import EventKind as P
from ._safe_text import one_line

_END_STATUS = {
    EndReason.stop: "done",
    EndReason.max_turns: "max turns",
    EndReason.interrupted: "interrupted",
    EndReason.error: "failed",
    EndReason.timeout: "timed out",
    EndReason.aborted: "cancelled",
}


@attrs.define
class Node:
    """What the view knows of one task."""

    path: tuple[str, ...]
    status: str = "queued"
    activity: str = ""
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def _clip(text: str, width: int = 48) -> str:
    # Whitespace runs (newlines included) become one space; the rest is escaped.
    text = one_line(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


def _name(name: str) -> str:
    return _clip(name, 40)


@attrs.define
class TreeView:
    """The state of every task seen in an event stream; ``update`` is sync and cheap."""

    nodes: dict[tuple[str, ...], Node] = attrs.Factory(dict)

    def node(self, path: tuple[str, ...]) -> Node:
        found = self.nodes.get(path)
        if found is None:
            found = self.nodes[path] = Node(path)
        return found

    def update(self, ev: Event) -> str | None:
        """Take in one event; return a one-line description when it is worth printing."""
        node = self.node(ev.path)
        kind = ev.kind
        if kind is P.task_queued:
            node.status = "queued"
            return None
        if kind is P.task_started:
            node.status = "running"
            return "started"
        if kind is P.task_finished and ev.summary is not None:
            node.status = _END_STATUS[ev.summary.end_reason]
            return f"{node.status} after {ev.summary.turns} turns"
        if kind is P.task_cancelled:
            node.status = "cancelled"
            return "cancelled"
        if kind is P.result_delivered and ev.child is not None:
            return f"result of {ev.child[-1]} delivered"
        if kind is P.task_orphaned:
            return f"orphaned: {_clip(ev.output or ev.error or '')}"
        inner = ev.event
        if inner is None:
            return None
        if kind is K.turn_start:
            node.turns = inner.turn
        elif kind is K.model_request:
            node.activity = "thinking"
        elif kind is K.model_delta:
            node.activity = "writing"
        elif kind is K.model_response and inner.message is not None:
            if inner.usage is not None:
                node.input_tokens += inner.usage.input_tokens
                node.output_tokens += inner.usage.output_tokens
            if not inner.message.tool_calls:
                node.activity = f"answered: {_clip(inner.message.content)}"
                return node.activity
        elif kind is K.tool_start and inner.call is not None:
            node.activity = f"{_name(inner.call.name)} {_clip(inner.call.arguments, 40)}"
            return f"calls {node.activity}"
        elif kind is K.gate_decision and inner.decision is not None and inner.call is not None:
            if not inner.decision.allowed:
                node.activity = f"denied {_name(inner.call.name)}"
                return f"{node.activity}: {one_line(inner.decision.reason)}"
        elif kind is K.tool_end and inner.call is not None and inner.is_error:
            node.activity = f"{_name(inner.call.name)} failed"
            return f"{node.activity}: {_clip(inner.text)}"
        elif kind is K.output_validation:
            if inner.is_error:
                node.activity = _clip(f"invalid output: {inner.text}")
            elif inner.call is not None:
                node.activity = f"answered (typed): {_clip(inner.call.arguments)}"
            return node.activity
        elif kind in (K.retry, K.error):
            node.activity = _clip(f"{kind}: {inner.text}")
            return node.activity
        return None

    def ordered(self) -> list[Node]:
        """Every node, parents before children, siblings in path order."""
        return [self.nodes[p] for p in sorted(self.nodes)]

    def total_tokens(self) -> tuple[int, int]:
        """Input and output tokens of every task seen."""
        nodes = self.nodes.values()
        return sum(n.input_tokens for n in nodes), sum(n.output_tokens for n in nodes)


def describe(node: Node) -> str:
    """One line about ``node``: name, status, turns, tokens, latest activity."""
    parts = [_name(node.path[-1]), node.status, f"turn {node.turns}", f"{node.tokens} tok"]
    if node.activity:
        parts.append(node.activity)
    return "  ".join(parts)


def render_lines(view: TreeView) -> list[str]:
    """The tree as indented plain text lines."""
    return ["  " * (len(n.path) - 1) + describe(n) for n in view.ordered()]


def render_rich(view: TreeView, title: str = "subagents") -> Any:
    """The tree as a ``rich.tree.Tree`` of ``Text`` labels, no markup (needs rich)."""
    from rich.text import Text
    from rich.tree import Tree

    root = Tree(Text(one_line(title), style="bold"))
    branches: dict[tuple[str, ...], Any] = {}
    for node in view.ordered():
        parent = branches.get(node.path[:-1], root)
        style = {"running": "yellow", "done": "green", "queued": "dim"}.get(node.status, "red")
        branches[node.path] = parent.add(Text(describe(node), style=style))
    return root
