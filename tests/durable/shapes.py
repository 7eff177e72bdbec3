"""Tree shapes for the crash-point harness: which agents a tree has, what each one's
model does turn by turn, and which of them are critical, typed, budgeted or gated.

A script is a list of turns; a turn a list of calls:

- ``("write",)`` a mutating tool; ``("bump",)`` an idempotent one; ``("look",)`` a
  read-only one; ``("ask",)`` a mutating one the gate defers (an approval pause);
- ``("sub", AGENT, WAIT)`` a delegation (``wait`` true or false); ``("results",)``
  ``subagent_results``;
- ``("steer",)`` an idempotent tool that steers the root task (a running task other
  than its own); ``("waitroot",)`` a read-only tool that returns once the root task
  has ended (so that a critical background child outlives its parent: an orphan).

After its turns an agent answers ``TASK done[CHILD OUTPUTS]`` (``+steered`` if a
steering message reached it); a typed agent answers through ``final_result``, first
with an invalid call (retried), then ``{"text": ...}``. The outputs therefore hold
every child's output, so a child lost or delivered twice changes the root's.
"""

from __future__ import annotations

import random

import attrs

Call = tuple[object, ...]
Script = list[list[Call]]


@attrs.frozen
class Shape:
    """One tree: its agents' scripts (``root`` is submitted), and their settings."""

    name: str
    agents: dict[str, Script]
    root: str = "root"
    critical: frozenset[str] = frozenset()
    typed: frozenset[str] = frozenset()
    #: model_calls budget of each agent named (its own subtree).
    budget: dict[str, int] = attrs.Factory(dict)
    #: The ledger: "jsonl", "sqlite" or "none" (checkpoints only: fewer points).
    ledger: str = "jsonl"


FIXED: list[Shape] = [
    # A nested run that delegates again after recovery: root -> mid -> leaf twice.
    Shape("nested", {
        "root": [[("sub", "mid", True)]],
        "mid": [[("sub", "leaf", True)], [("sub", "leaf", True)]],
        "leaf": [[("write",)]],
    }),
    # Two waited-for children in parallel (one turn, two delegations).
    Shape("parallel", {
        "root": [[("sub", "a", True), ("sub", "b", True)]],
        "a": [[("write",)]],
        "b": [[("write",), ("bump",)]],
    }),
    # A background child whose result is delivered (while root works), unread, read.
    Shape("background", {
        "root": [[("sub", "side", False)], [("write",)], [("results",)]],
        "side": [[("write",)]],
    }),
    # An orphan: a critical background child that ends after its parent did.
    Shape("orphan", {
        "root": [[("sub", "late", False)]],
        "late": [[("waitroot",)], [("write",)]],
    }, critical=frozenset({"late"})),
    # A critical background child its parent waits for.
    Shape("critical", {
        "root": [[("sub", "keep", False), ("results",)], [("write",)]],
        "keep": [[("write",)]],
    }, critical=frozenset({"keep"})),
    # An approval pause inside a child with a budget.
    Shape("approval", {
        "root": [[("sub", "child", True)]],
        "child": [[("write",)], [("ask",)]],
    }, budget={"child": 20}),
    # Approval pauses inside a background child: a subagent it waits for asks twice
    # (the claim stores both paused rows' answers, background and waited-for; the
    # resumed background child pauses again in its own row).
    Shape("bg-approval", {
        "root": [[("sub", "side", False)], [("results",)]],
        "side": [[("sub", "leaf", True)]],
        "leaf": [[("write",)], [("ask",)], [("ask",)]],
    }),
    # Steering sent to the running root by its child's tool.
    Shape("steering", {
        "root": [[("sub", "child", True)], [("look",)]],
        "child": [[("steer",)]],
    }),
    # Typed output with a retry, from a child and the root.
    Shape("typed", {
        "root": [[("sub", "typed", True)]],
        "typed": [[("write",)]],
    }, typed=frozenset({"typed"})),
    # The same nested tree with an SQLite ledger.
    Shape("nested-sqlite", {
        "root": [[("sub", "mid", True)]],
        "mid": [[("sub", "leaf", True)], [("write",)]],
        "leaf": [[("write",)]],
    }, ledger="sqlite"),
]

#: Small shapes, checkpoints only, whose every pair of points (a crash in recovery
#: too) CI tries.
SMALL: list[Shape] = [
    Shape("pair-tiny", {
        "root": [[("sub", "child", True)]],
        "child": [[("write",)]],
    }, ledger="none"),
    Shape("pair-nested", {
        "root": [[("sub", "mid", True)]],
        "mid": [[("sub", "leaf", True)], [("sub", "leaf", True)]],
        "leaf": [[("write",)]],
    }, ledger="none"),
    Shape("pair-approval", {
        "root": [[("sub", "child", True)]],
        "child": [[("ask",)]],
    }, budget={"child": 20}, ledger="none"),
]

_TOOLS: list[Call] = [("write",), ("bump",), ("look",), ("write",)]


def generate(seed: int) -> Shape:
    """A random tree (seeded): up to 3 levels, each agent up to 3 turns of up to 2
    calls, delegations waited for or not (background ones read with
    ``subagent_results``), some agents typed, critical, budgeted or asking."""
    rng = random.Random(seed)
    agents: dict[str, Script] = {}
    critical: set[str] = set()
    typed: set[str] = set()
    budget: dict[str, int] = {}
    counter = 0

    def agent(depth: int, under_background: bool = False) -> str:
        # No approval pause under a background delegation: there the uncrashed run's
        # own outcome races (issue 32 item 4: a paused background child's parent is
        # told "1 result arrived" and may end, cancelling it), so it is no reference.
        nonlocal counter
        counter += 1
        name = f"a{counter}" if depth else "root"
        script: Script = []
        background = False
        for _ in range(rng.randint(1, 3)):
            turn: list[Call] = []
            for _ in range(rng.randint(1, 2)):
                if depth < 2 and counter < 7 and rng.random() < 0.45:
                    wait = rng.random() < 0.6
                    child = agent(depth + 1, under_background or not wait)
                    if not wait and rng.random() < 0.3:
                        critical.add(child)
                    background |= not wait
                    turn.append(("sub", child, wait))
                elif rng.random() < 0.08 and not under_background:
                    turn.append(("ask",))
                else:
                    turn.append(rng.choice(_TOOLS))
            script.append(turn)
        if background:
            script.append([("results",)])
        if rng.random() < 0.2:
            typed.add(name)
        if rng.random() < 0.2:
            budget[name] = 40
        agents[name] = script
        return name

    agent(0)
    return Shape(f"gen-{seed}", agents, critical=frozenset(critical), typed=frozenset(typed),
                 budget=budget, ledger=rng.choice(["jsonl", "jsonl", "sqlite"]))


SHAPES = {shape.name: shape for shape in [*FIXED, *SMALL]}
