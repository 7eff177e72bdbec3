"""The live tree of a pool's tasks: a pure model fed by events, and two renderers.

:class:`TreeView` keeps, per AgentPath, the task's status, latest activity, turns,
tokens and cost, and, given the budgets, what is left of them.
:func:`render_lines` draws it as indented plain text; :func:`render_rich` as a
``rich`` tree (the optional ``view`` extra).

Everything a model or a tool wrote (answers, tool names and arguments, error texts)
goes through :func:`subagent._safe_text.one_line` before the view keeps it, so no
line it returns or draws holds a control character or a terminal escape, and the
rich tree is made of ``Text`` objects, never of markup built from that text.
"""

from __future__ import annotations

from typing import Any

import attrs

from agentcore import EventKind as K
from agentcore import Usage

from .._cost._budget import Budget, Spend, show
from .._events import Event
from .._events import EventKind as P
from .._safe_text import one_line
from ..serve._tree import END_STATUS


@attrs.define
class Node:
    """What the view knows of one task."""

    path: tuple[str, ...]
    status: str = "queued"
    activity: str = ""
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: US dollars; None once a call with tokens came without a cost (unknown).
    cost: float | None = 0.0
    calls: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, usage: Usage) -> None:
        """Count one model call's usage."""
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.calls += 1
        if usage.cost is not None and self.cost is not None:
            self.cost += usage.cost
        elif usage.input_tokens or usage.output_tokens:
            self.cost = None


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
    #: The budget of each agent's tasks, by spec name (those with one).
    budgets: dict[str, Budget] = attrs.Factory(dict)
    #: The pool's budget, over every task.
    pool_budget: Budget | None = None

    def node(self, path: tuple[str, ...]) -> Node:
        found = self.nodes.get(path)
        if found is None:
            found = self.nodes[path] = Node(path)
        return found

    def update(self, ev: Event) -> str | None:
        """Take in one event; return a one-line description when it is worth printing."""
        kind = ev.kind
        if kind in (P.budget_warning, P.budget_exceeded) and ev.budget is not None:
            return one_line(ev.budget.message())
        if not ev.path:
            # The pool's own events (mcp_server_error, ...) belong to no task.
            return one_line(f"{kind}: {ev.error}") if ev.error else None
        node = self.node(ev.path)
        if kind is P.task_queued:
            node.status = "queued"
            return None
        if kind is P.task_started:
            node.status = "running"
            return "started"
        if kind is P.task_finished and ev.summary is not None:
            node.status = END_STATUS[ev.summary.end_reason]
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
                node.add(inner.usage)
            if not inner.message.tool_calls:
                node.activity = f"answered: {_clip(inner.message.content)}"
                return node.activity
        elif kind is K.tool_start and inner.call is not None:
            node.activity = f"{_name(inner.call.name)} {_clip(inner.call.arguments, 40)}"
            return f"calls {node.activity}"
        elif kind is K.gate_decision and inner.decision is not None and inner.call is not None:
            if inner.decision.deferred:  # not a denial: a human answers it later
                node.activity = f"waits for approval: {_name(inner.call.name)}"
                return (f"deferred {_name(inner.call.name)}, waiting for approval: "
                        f"{one_line(inner.decision.reason)}")
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

    def spend(self, path: tuple[str, ...] = ()) -> Spend:
        """What the tasks at and below ``path`` spent (``()``: every task seen)."""
        nodes = [n for p, n in self.nodes.items() if p[: len(path)] == path]
        costs = [n.cost for n in nodes]
        inputs, outputs = sum(n.input_tokens for n in nodes), sum(n.output_tokens for n in nodes)
        return Spend(
            inputs + outputs, inputs, outputs,
            None if None in costs else sum(c for c in costs if c is not None),
            sum(n.calls for n in nodes), len(nodes),
        )

    def budget_of(self, node: Node) -> Budget | None:
        """The budget the task of ``node`` owns, if its agent has one."""
        return self.budgets.get(node.path[-1].rsplit("/", 1)[0])

    def describe(self, node: Node) -> str:
        """One line about ``node``: name, status, turns, tokens, cost (when known), what
        is left of its budget (when it has one), latest activity."""
        parts = [_name(node.path[-1]), node.status, f"turn {node.turns}", f"{node.tokens} tok"]
        if node.cost is not None and node.tokens:
            parts.append(dollars(node.cost))
        budget = self.budget_of(node)
        if budget is not None:
            parts.append(f"budget left {left(budget, self.spend(node.path))}")
        if node.activity:
            parts.append(node.activity)
        return "  ".join(parts)


def dollars(value: float) -> str:
    """A cost as the view shows it."""
    return f"${value:.6f}" if value < 1 else f"${value:,.2f}"


_UNITS = {
    "tokens": "tokens",
    "input_tokens": "input tokens",
    "output_tokens": "output tokens",
    "model_calls": "model calls",
    "tasks": "tasks",
}


def left(budget: Budget, spend: Spend) -> str:
    """What is left of each limit of ``budget`` after ``spend`` (never below 0)."""
    parts = []
    for name, allowed in budget.limits():
        spent = getattr(spend, name)
        if name != "cost":
            parts.append(f"{max(0, int(allowed) - spent)} of {int(allowed)} {_UNITS[name]}")
        elif spent is None:
            parts.append(f"unknown of {show(name, allowed)} (a cost is unknown)")
        else:
            parts.append(f"{dollars(max(0.0, allowed - spent))} of {show(name, allowed)}")
    return ", ".join(parts)


def render_lines(view: TreeView) -> list[str]:
    """The tree as indented plain text lines."""
    return ["  " * (len(n.path) - 1) + view.describe(n) for n in view.ordered()]


def render_rich(view: TreeView, title: str = "subagents") -> Any:
    """The tree as a ``rich.tree.Tree`` of ``Text`` labels, no markup (needs rich); the
    title line adds the tree's tokens, cost and the pool budget left."""
    from rich.text import Text
    from rich.tree import Tree

    root = Tree(Text(f"{one_line(title)}  {totals(view)}", style="bold"))
    branches: dict[tuple[str, ...], Any] = {}
    for node in view.ordered():
        parent = branches.get(node.path[:-1], root)
        style = {"running": "yellow", "done": "green", "queued": "dim"}.get(node.status, "red")
        branches[node.path] = parent.add(Text(view.describe(node), style=style))
    return root


def totals(view: TreeView) -> str:
    """The whole tree's tokens and cost, and what is left of the pool's budget."""
    spend = view.spend()
    cost = "cost unknown" if spend.cost is None else dollars(spend.cost)
    text = f"{spend.tokens} tok  {cost}"
    if view.pool_budget is not None:
        text += f"  budget left {left(view.pool_budget, spend)}"
    return text
