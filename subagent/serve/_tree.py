"""LiveTree: what the page shows of every run, fed by the pool's events. Pure and
sync: per AgentPath the agent, status, turn, tokens and cost, and the last activity."""

from __future__ import annotations

from typing import Any

import attrs

import agentcore
import subagent
from agentcore import AgentPath, EndReason
from agentcore import EventKind as K
from subagent import EventKind as P

from ._wire import clip

#: The status word of a run that ended, by its end reason: the live tree's here, and
#: the terminal view's (``subagent._cli._view``, above this package, imports it).
END_STATUS = {
    EndReason.stop: "done",
    EndReason.max_turns: "max turns",
    EndReason.interrupted: "interrupted",
    EndReason.error: "failed",
    EndReason.timeout: "timed out",
    EndReason.aborted: "cancelled",
    EndReason.paused: "paused",
}

#: The most runs the tree keeps (the oldest ended root trees go first).
MAX_RUNS = 10_000


def _in_order(path: AgentPath) -> list[tuple[int, str]]:
    # Runs in the order the pool numbered them ("name/0007" is number 7), parents first.
    key = []
    for part in path:
        name, _, number = part.rpartition("/")
        key.append((int(number) if number.isdigit() else 0, name))
    return key


@attrs.define
class RunNode:
    """What the tree knows of one run."""

    path: AgentPath
    status: str = "queued"
    turn: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: US dollars; None once a call with tokens came without a price (unknown).
    cost: float | None = 0.0
    activity: str = ""
    calls: int = 0

    def add(self, usage: agentcore.Usage) -> None:
        """Count one model call's usage."""
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.calls += 1
        if usage.cost is not None and self.cost is not None:
            self.cost += usage.cost
        elif usage.input_tokens or usage.output_tokens:
            self.cost = None

    def wire(self) -> dict[str, Any]:
        """The node as JSON-ready data."""
        return {"path": list(self.path), "agent": self.path[-1].rsplit("/", 1)[0],
                "status": self.status, "turn": self.turn,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost": self.cost, "activity": self.activity}


@attrs.define
class LiveTree:
    """Every run seen, by AgentPath (see the module docstring)."""

    nodes: dict[AgentPath, RunNode] = attrs.Factory(dict)

    def node(self, path: AgentPath) -> RunNode:
        """The node of ``path``, made on first use."""
        found = self.nodes.get(path)
        if found is None:
            found = self.nodes[path] = RunNode(path)
            if len(self.nodes) > MAX_RUNS:
                self._forget_one()
        return found

    def _forget_one(self) -> None:
        # The oldest root whose whole tree ended, with its tree.
        live = {"queued", "running", "paused"}
        for path, node in self.nodes.items():
            if len(path) == 1 and node.status not in live:
                root = path
                break
        else:
            return
        for path in [p for p in self.nodes if p[:1] == root]:
            del self.nodes[path]

    def update(self, ev: subagent.Event) -> None:
        """Take in one event. Not a checkpoint."""
        if not ev.path:
            return  # the pool's own events (mcp_server_error, ...) belong to no run
        node = self.node(ev.path)
        kind = ev.kind
        if kind is P.task_queued:
            node.status = "queued"
        elif kind is P.task_started:
            node.status = "running"
        elif kind is P.task_finished and ev.summary is not None:
            node.status = END_STATUS[ev.summary.end_reason]
            if node.status != "paused":
                node.activity = ""
        elif kind is P.task_cancelled:
            node.status = "cancelled"
        inner = ev.event
        if inner is None:
            return
        if kind is K.turn_start:
            node.turn = inner.turn
        elif kind is K.model_response and inner.usage is not None:
            node.add(inner.usage)
        elif kind is K.tool_start and inner.call is not None:
            node.activity = clip(f"calls {inner.call.name}", 200)
        elif (kind is K.gate_decision and inner.decision is not None
              and inner.decision.deferred and inner.call is not None):
            node.activity = clip(f"waits for approval: {inner.call.name}", 200)

    def add_paused(self, state: agentcore.RunState) -> None:
        """Show a paused tree the pool's events did not (found by ``recover()`` after
        a restart): each run of it, paused, at its turn and usage."""
        stack = [state]
        while stack:
            s = stack.pop()
            node = self.node(s.path)
            node.status = "paused"
            node.turn = s.turn
            if not node.input_tokens and not node.output_tokens:
                node.add(s.usage)
            if any(p.status is agentcore.CallStatus.deferred for p in s.pending):
                node.activity = "waits for approval"
            stack.extend(s.children)

    def wire(self) -> dict[str, Any]:
        """Every run, parents first, and each root tree's totals."""
        ordered = [self.nodes[p] for p in sorted(self.nodes, key=_in_order)]
        trees: dict[str, dict[str, Any]] = {}
        for n in ordered:
            total = trees.setdefault(n.path[0], {"root": n.path[0], "runs": 0,
                                                "input_tokens": 0, "output_tokens": 0,
                                                "cost": 0.0})
            total["runs"] += 1
            total["input_tokens"] += n.input_tokens
            total["output_tokens"] += n.output_tokens
            if total["cost"] is not None:
                total["cost"] = None if n.cost is None else total["cost"] + n.cost
        return {"runs": [n.wire() for n in ordered], "trees": list(trees.values())}
