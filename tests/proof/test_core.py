"""The pool's rules alone: a hypothesis state machine drives ``PoolCore`` with no trio
(issue 16, item 5), the way the shell would (accept after admit, a run ends only
holding its slot or cancelled, lending calls nest, a waiting take-back may be
withdrawn), and checks its invariants after every step, plus that an illegal move
raises and changes nothing. The rules between a task and its children follow:
fan-out claims (taken, parked, withdrawn, given back, or held by a child until it
settles), background delivery (every background child's result delivered or
orphaned exactly once), and the roll-up of tree usage.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from subagent import MaxDepthError, PoolClosedError
from subagent._core._core import (
    Arrived,
    CancelRun,
    Effect,
    Grant,
    IllegalTransition,
    Node,
    PoolCore,
    QueueFull,
    Resolve,
    StartRunner,
    TaskStatus,
    WakeFanout,
    WakeSubmitter,
)

END = (TaskStatus.finished, TaskStatus.failed, TaskStatus.timed_out, TaskStatus.cancelled)


def found_parent(core: PoolCore[int], path: tuple[str, ...]) -> Node[int] | None:
    return core.live.get(path) if path else None


class CoreMachine(RuleBasedStateMachine):
    """Random workloads on one core; ``nodes`` are every node ever accepted."""

    def __init__(self) -> None:
        super().__init__()
        self.core: PoolCore[int] = PoolCore(1, 1, 1)
        self.nodes: list[Node[int]] = []
        self.parked: list[object] = []
        self.started: set[int] = set()
        self.number = 0
        # Submits parked after the pool closed (a running parent delegating).
        self.parked_closed: set[object] = set()
        # Fan-out claims taken and not yet given to a child, and claims parked, by node.
        self.claims: dict[Node[int], int] = {}
        self.fan_parked: dict[object, Node[int]] = {}
        # Background children: how each result ended (delivered, unread, orphaned).
        self.outcome: dict[Node[int], str] = {}
        # The usage each node's core roll-up must show (own, once sealed, plus children's).
        self.expected_usage: dict[Node[int], int] = {}

    @initialize(concurrent=st.integers(1, 3), queued=st.integers(1, 4), depth=st.integers(1, 3))
    def open(self, concurrent: int, queued: int, depth: int) -> None:
        self.core = PoolCore(concurrent, queued, depth)

    def apply(self, effects: list[Effect[int]]) -> None:
        for effect in effects:
            if isinstance(effect, WakeSubmitter):
                self.parked.remove(effect.token)
            elif isinstance(effect, WakeFanout):
                # The parked claim holds a slot now.
                parent = self.fan_parked.pop(effect.token)
                self.claims[parent] = self.claims.get(parent, 0) + 1
            elif isinstance(effect, Arrived):
                assert effect.node in self.nodes
            elif isinstance(effect, StartRunner):
                assert effect.node.handle not in self.started
                self.started.add(effect.node.handle)
            elif isinstance(effect, Grant):
                assert effect.node.holds_slot
            elif isinstance(effect, CancelRun):
                assert effect.node.cancel_cause is not None
            else:
                assert isinstance(effect, Resolve) and effect.node.resolved

    def pick(self, data: st.DataObject, nodes: list[Node[int]]) -> Node[int]:
        return data.draw(st.sampled_from(nodes))

    def running(self) -> list[Node[int]]:
        return [n for n in self.nodes if n.status is TaskStatus.running and not n.resolved]

    # -- rules -----------------------------------------------------------------------

    @rule(data=st.data(), inside=st.booleans(), limit=st.integers(1, 2))
    def submit(self, data: st.DataObject, inside: bool, limit: int) -> None:
        core = self.core
        # Under any node, live or resolved (a resolved one is no parent: found is None).
        parent: Node[int] | None = None
        under: bool = data.draw(st.booleans())
        if under and self.nodes:
            parent = self.pick(data, self.nodes)
        path = parent.path if parent is not None else ()
        caller = parent if inside else None
        before = core.statistics()
        try:
            found, depth = core.admit("a", path, caller)
        except (MaxDepthError, PoolClosedError, QueueFull) as exc:
            assert core.statistics() == before
            if isinstance(exc, MaxDepthError):
                assert max(len(path), caller.depth if caller else 0) >= core.max_depth
            elif isinstance(exc, QueueFull):
                assert len(core.queue) == core.max_queued
                if data.draw(st.booleans()):
                    token = object()
                    core.park_submitter(token)
                    self.parked.append(token)
                    if core.closed:
                        # Only a running task submitting under its own path gets here.
                        assert caller is not None and caller is found_parent(core, path)
                        self.parked_closed.add(token)
            return
        assert found is (parent if parent is not None and not parent.resolved else None)
        assert depth == max(len(path), caller.depth if caller else 0) + 1
        self.number += 1
        node: Node[int] = Node(
            (*path, f"a/{self.number}"), found, self.number, depth=depth, fanout_limit=limit
        )
        # A child of a live node may take a fan-out claim of it, and go to the background.
        fanout = found is not None and self.claims.get(found, 0) > 0 and data.draw(st.booleans())
        background = (
            found is not None and found.status is TaskStatus.running and data.draw(st.booleans())
        )
        self.nodes.append(node)
        self.apply(core.accept(node, fanout=fanout, background=background))
        if fanout:
            assert found is not None
            self.claims[found] -= 1
            assert node.holds_fanout
        if background:
            self.outcome[node] = "running"
        assert node.handle in self.started
        # Below a cancelled node, whether or not it has resolved, the node is cancelled.
        above = {n.path for n in self.nodes if n.cancel_cause is not None and n is not node}
        below_a_cancel = any(path[:k] in above for k in range(1, len(path) + 1))
        assert (node.cancel_cause is not None) == below_a_cancel

    @precondition(lambda self: self.parked)
    @rule(data=st.data())
    def cancel_parked_submit(self, data: st.DataObject) -> None:
        token = data.draw(st.sampled_from(self.parked))
        self.core.withdraw_submitter(token)
        self.parked.remove(token)

    @precondition(lambda self: any(n.holds_slot or n.lending for n in self.running()))
    @rule(data=st.data())
    def lend(self, data: st.DataObject) -> None:
        node = self.pick(data, [n for n in self.running() if n.holds_slot or n.lending])
        self.apply(self.core.lend(node))
        assert not node.holds_slot or node.lending > 1
        child = [c for c in node.children if not c.resolved]
        if child and node.lending == 1 and data.draw(st.booleans()):
            self.core.await_child(node, child[-1])

    @precondition(lambda self: any(n.lending for n in self.running()))
    @rule(data=st.data())
    def lend_ends(self, data: st.DataObject) -> None:
        node = self.pick(data, [n for n in self.running() if n.lending])
        if node.awaiting is not None and data.draw(st.booleans()):
            self.core.stop_awaiting(node, node.awaiting)
        if self.core.lend_ended(node):
            granted, effects = self.core.take_back(node)
            self.apply(effects)
            assert granted == node.holds_slot
            assert granted or node in self.core.returning

    @rule(data=st.data())
    def take_back_again(self, data: st.DataObject) -> None:
        # A take-back withdrawn by a cancel from inside the run is tried again.
        again = [
            n
            for n in self.running()
            if not n.holds_slot and not n.lending and n not in self.core.returning
        ]
        if again:
            node = self.pick(data, again)
            granted, effects = self.core.take_back(node)
            self.apply(effects)
            assert granted == node.holds_slot

    @precondition(lambda self: self.core.returning)
    @rule(data=st.data())
    def withdraw(self, data: st.DataObject) -> None:
        node = self.pick(data, list(self.core.returning))
        self.core.withdraw(node)
        assert not node.holds_slot

    @rule(data=st.data(), status=st.sampled_from(END))
    def run_ends(self, data: st.DataObject, status: TaskStatus) -> None:
        # A run ends holding its slot, or cancelled (then with or without one); a
        # task cancelled while queued ends without running. Never while lending.
        ends = [
            n
            for n in self.nodes
            if not n.resolved
            and not n.lending
            and n not in self.core.returning
            and (n.holds_slot or n.cancel_cause is not None)
        ]
        if not ends:
            return
        node = self.pick(data, ends)
        was = node.status
        if node.cancel_cause is not None and not node.holds_slot:
            status = TaskStatus.cancelled
        self.apply(self.core.run_ended(node, status))
        assert not node.holds_slot
        assert node.status is (status if was is TaskStatus.running else was)
        for child in self.core.take_unread(node):
            assert self.outcome[child] == "unread"
            self.outcome[child] = "orphaned"
        usage = data.draw(st.integers(1, 9))
        self.core.seal(node, usage)
        self.expected_usage[node] = self.expected_usage.get(node, 0) + usage
        target = node.deliver_to
        # The shell offers a result only to a parent whose run has not ended.
        inbox_open = (
            target is not None and target.status is TaskStatus.running and data.draw(st.booleans())
        )
        parent = node.parent
        if parent is not None and not parent.sealed:
            self.expected_usage[parent] = (
                self.expected_usage.get(parent, 0) + self.expected_usage[node]
            )
        kept, effects = self.core.settle(node, inbox_open)
        self.apply(effects)
        assert not node.holds_fanout
        if target is None:
            assert kept
        else:
            assert kept is inbox_open
            assert Arrived(target) in effects
            self.outcome[node] = "unread" if inbox_open else "orphaned"
        with pytest.raises(IllegalTransition):
            self.core.settle(node, inbox_open) if target is not None else self.core.seal(node, 0)
        self.apply(self.core.resolve(node))
        assert node.path not in self.core.live

    @precondition(lambda self: self.nodes)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        node = self.pick(data, self.nodes)
        self.apply(self.core.cancel(node))
        stack = [node]
        while stack:
            one = stack.pop()
            assert one.cancel_cause is not None and one.status is not TaskStatus.queued
            stack.extend(one.children)

    # Closing and cancelling the pool end a workload: only once it has some nodes
    # (rules without arguments are drawn often, and would end most runs at once).
    @precondition(lambda self: len(self.nodes) >= 4 and not self.core.closed)
    @rule()
    def close(self) -> None:
        self.apply(self.core.close())
        assert not self.parked

    @precondition(lambda self: len(self.nodes) >= 6 and not self.core.aborted)
    @rule()
    def abort(self) -> None:
        self.apply(self.core.abort())
        assert not self.core.queue
        assert all(n.cancel_cause is not None for n in self.core.live.values())

    # -- fan-out, background, usage ------------------------------------------------

    @precondition(lambda self: self.core.live)
    @rule(data=st.data())
    def claim(self, data: st.DataObject) -> None:
        node = self.pick(data, list(self.core.live.values()))
        if self.core.claim_fanout(node):
            self.claims[node] = self.claims.get(node, 0) + 1
        elif data.draw(st.booleans()):
            token = object()
            self.core.park_fanout(node, token)
            self.fan_parked[token] = node

    @precondition(lambda self: any(self.claims.values()))
    @rule(data=st.data(), background=st.booleans())
    def submit_child(self, data: st.DataObject, background: bool) -> None:
        # The shell's delegation: a claimed fan-out slot goes to the new child.
        core = self.core
        parent = self.pick(data, [n for n, k in self.claims.items() if k])
        try:
            found, depth = core.admit("a", parent.path, parent)
        except (MaxDepthError, PoolClosedError, QueueFull):
            return
        if found is None:
            return
        self.number += 1
        node: Node[int] = Node(
            (*parent.path, f"a/{self.number}"), found, self.number, depth=depth, fanout_limit=1
        )
        background = background and parent.status is TaskStatus.running
        self.nodes.append(node)
        self.apply(core.accept(node, fanout=True, background=background))
        self.claims[parent] -= 1
        if background:
            self.outcome[node] = "running"

    @precondition(lambda self: self.fan_parked)
    @rule(data=st.data())
    def withdraw_claim(self, data: st.DataObject) -> None:
        token = data.draw(st.sampled_from(list(self.fan_parked)))
        self.core.withdraw_fanout(self.fan_parked.pop(token), token)

    @precondition(lambda self: any(self.claims.values()))
    @rule(data=st.data())
    def release_claim(self, data: st.DataObject) -> None:
        node = self.pick(data, [n for n, k in self.claims.items() if k])
        self.claims[node] -= 1
        self.apply(self.core.release_fanout(node))

    @rule(data=st.data())
    def to_background(self, data: st.DataObject) -> None:
        waited = [
            n
            for n in self.nodes
            if n.parent is not None
            and n.parent.status is TaskStatus.running
            and n.deliver_to is None
            and not n.resolved
        ]
        if waited:
            node = self.pick(data, waited)
            assert node.parent is not None
            self.core.to_background(node.parent, node)
            self.outcome[node] = "running"

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        unread = [n for n, o in self.outcome.items() if o == "unread"]
        if unread:
            node = self.pick(data, unread)
            assert node.deliver_to is not None
            self.core.read(node.deliver_to, node)
            self.outcome[node] = "delivered"

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def illegal_moves_change_nothing(self, data: st.DataObject) -> None:
        node = self.pick(data, self.running())
        before = (
            self.core.statistics(),
            node.holds_slot,
            node.lending,
            node.status,
            node.fanout_used,
            node.sealed,
            list(node.unread),
            dict(node.background),
        )
        with pytest.raises(IllegalTransition):
            self.core.resolve(node)
        with pytest.raises(IllegalTransition):
            self.core.accept(node)
        if not node.lending:
            with pytest.raises(IllegalTransition):
                self.core.lend_ended(node)
        with pytest.raises(IllegalTransition):
            self.core.settle(node, True)
        with pytest.raises(IllegalTransition):
            self.core.seal(node, 1)
        with pytest.raises(IllegalTransition):
            self.core.withdraw_fanout(node, object())
        with pytest.raises(IllegalTransition):
            self.core.read(node, node)
        if node.fanout_used == 0:
            with pytest.raises(IllegalTransition):
                self.core.release_fanout(node)
        assert (
            self.core.statistics(),
            node.holds_slot,
            node.lending,
            node.status,
            node.fanout_used,
            node.sealed,
            list(node.unread),
            dict(node.background),
        ) == before

    # -- invariants ------------------------------------------------------------------

    @invariant()
    def counts(self) -> None:
        core = self.core
        stats = core.statistics()
        assert stats.accepted == (
            stats.queued + stats.running + stats.finished + stats.failed + stats.cancelled
        )
        assert stats.accepted == len(self.nodes)
        holders = [n for n in self.nodes if n.holds_slot]
        assert stats.holding_slots == len(holders) <= core.max_concurrent
        assert all(n.status is TaskStatus.running and not n.resolved for n in holders)
        assert stats.running == len([n for n in self.nodes if n.status is TaskStatus.running])
        assert [n for n in self.nodes if n.status is TaskStatus.queued] == list(core.queue)
        assert stats.waiting_submitters == len(self.parked)

    @invariant()
    def work_conserving(self) -> None:
        # A free slot never sits beside a waiting run; closing wakes every parked submit.
        core = self.core
        if core.holding < core.max_concurrent:
            assert not core.queue and not core.returning
        if core.closed:
            # close() woke every parked submit; only delegations parked since remain.
            assert set(core.submitters) <= self.parked_closed
        for node in core.returning:
            assert node.status is TaskStatus.running and not node.holds_slot

    @invariant()
    def fan_out(self) -> None:
        for node in self.nodes:
            holders = [c for c in node.children if c.holds_fanout]
            assert node.fanout_used == self.claims.get(node, 0) + len(holders)
            assert node.fanout_used <= node.fanout_limit
            parked = [t for t, n in self.fan_parked.items() if n is node]
            assert list(node.fanout_waiters or ()) == parked
            if parked:
                assert node.fanout_used == node.fanout_limit

    @invariant()
    def delivery(self) -> None:
        # Each background child is, exactly once, running (in its parent's
        # background), unread (in its inbox), then delivered, or orphaned.
        for node, outcome in self.outcome.items():
            target = node.deliver_to
            assert target is not None
            assert (node in target.background) == (outcome == "running")
            assert (node in target.unread) == (outcome == "unread")

    @invariant()
    def usage(self) -> None:
        for node in self.nodes:
            expected = self.expected_usage.get(node)
            assert self.core.tree_usage(node) == expected, node

    @invariant()
    def live_and_cancels(self) -> None:
        core = self.core
        assert set(core.live) == {n.path for n in self.nodes if not n.resolved}
        for node in self.nodes:
            if node.resolved and node.cancel_cause is not None and not core.aborted:
                assert core.ended_cancels.get(node.path) is node
        if core.aborted:
            # Nothing is admitted after an abort (so resolve() records no mark then:
            # nothing would read it).
            with pytest.raises(PoolClosedError):
                core.admit("late", (), None)


TestCore = pytest.mark.slow(CoreMachine.TestCase)


def test_the_core_imports_no_trio_and_no_io() -> None:
    # The core's modules, and every module of the package they import, import only
    # the standard library's pure parts and attrs (outside TYPE_CHECKING blocks).
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    allowed = {"__future__", "attrs", "collections", "enum", "typing", "weakref"}
    seen: set[str] = set()
    todo = ["subagent._core._core"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        package = name.rpartition(".")[0]
        tree = ast.parse(root.joinpath(*name.split(".")).with_suffix(".py").read_text())
        for node in tree.body:  # top level only: TYPE_CHECKING imports are in an `if`
            if isinstance(node, ast.ImportFrom) and node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                todo.append(".".join([*anchor, str(node.module)]))
            elif isinstance(node, ast.ImportFrom):
                assert str(node.module).split(".")[0] in allowed, (name, node.module)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] in allowed, (name, alias.name)
    assert seen == {
        "subagent._core._core", "subagent._core._node", "subagent._core._statistics",
        "subagent._errors",
    }
