"""The pool's rules alone: a hypothesis state machine drives ``PoolCore`` with no trio
(issue 16, item 5), the way the shell would (accept after admit, a run ends only
holding its slot or cancelled, lending calls nest, a waiting take-back may be
withdrawn), and checks its invariants after every step, plus that an illegal move
raises and changes nothing.
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
from subagent._core import (
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
    WakeSubmitter,
)

END = (TaskStatus.finished, TaskStatus.failed, TaskStatus.timed_out, TaskStatus.cancelled)


class CoreMachine(RuleBasedStateMachine):
    """Random workloads on one core; ``nodes`` are every node ever accepted."""

    def __init__(self) -> None:
        super().__init__()
        self.core: PoolCore[int] = PoolCore(1, 1, 1)
        self.nodes: list[Node[int]] = []
        self.parked: list[object] = []
        self.started: set[int] = set()
        self.number = 0

    @initialize(
        concurrent=st.integers(1, 3), queued=st.integers(1, 4), depth=st.integers(1, 3)
    )
    def open(self, concurrent: int, queued: int, depth: int) -> None:
        self.core = PoolCore(concurrent, queued, depth)

    def apply(self, effects: list[Effect[int]]) -> None:
        for effect in effects:
            if isinstance(effect, WakeSubmitter):
                self.parked.remove(effect.token)
            elif isinstance(effect, StartRunner):
                assert effect.node.handle not in self.started
                self.started.add(effect.node.handle)
            elif isinstance(effect, Grant):
                assert effect.node.holds_slot
            elif isinstance(effect, CancelRun):
                assert effect.node.cancel_called
            else:
                assert isinstance(effect, Resolve) and effect.node.resolved

    def pick(self, data: st.DataObject, nodes: list[Node[int]]) -> Node[int]:
        return data.draw(st.sampled_from(nodes))

    def running(self) -> list[Node[int]]:
        return [n for n in self.nodes if n.status is TaskStatus.running and not n.resolved]

    # -- rules -----------------------------------------------------------------------

    @rule(data=st.data(), inside=st.booleans())
    def submit(self, data: st.DataObject, inside: bool) -> None:
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
                assert len(path) >= core.max_depth
            elif isinstance(exc, QueueFull):
                assert len(core.queue) == core.max_queued
                if data.draw(st.booleans()):
                    token = object()
                    core.park_submitter(token)
                    self.parked.append(token)
            return
        assert found is (parent if parent is not None and not parent.resolved else None)
        self.number += 1
        node: Node[int] = Node((*path, f"a/{self.number}"), found, self.number, depth=depth)
        self.nodes.append(node)
        self.apply(core.accept(node))
        assert node.handle in self.started
        # Below a cancelled node, whether or not it has resolved, the node is cancelled.
        above = {n.path for n in self.nodes if n.cancel_called and n is not node}
        below_a_cancel = any(path[:k] in above for k in range(1, len(path) + 1))
        assert node.cancel_called == below_a_cancel

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
            and (n.holds_slot or n.cancel_called)
        ]
        if not ends:
            return
        node = self.pick(data, ends)
        was = node.status
        if node.cancel_called and not node.holds_slot:
            status = TaskStatus.cancelled
        self.apply(self.core.run_ended(node, status))
        assert not node.holds_slot
        assert node.status is (status if was is TaskStatus.running else was)
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
            assert one.cancel_called and one.status is not TaskStatus.queued
            stack.extend(one.children)

    @rule()
    def close(self) -> None:
        self.apply(self.core.close())
        assert not self.parked

    @rule()
    def abort(self) -> None:
        self.apply(self.core.abort())
        assert not self.core.queue
        assert all(n.cancel_called for n in self.core.live.values())

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def illegal_moves_change_nothing(self, data: st.DataObject) -> None:
        node = self.pick(data, self.running())
        before = (self.core.statistics(), node.holds_slot, node.lending, node.status)
        with pytest.raises(IllegalTransition):
            self.core.resolve(node)
        with pytest.raises(IllegalTransition):
            self.core.accept(node)
        if not node.lending:
            with pytest.raises(IllegalTransition):
                self.core.lend_ended(node)
        assert (self.core.statistics(), node.holds_slot, node.lending, node.status) == before

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
        if core.submitters:
            assert not core.closed
        for node in core.returning:
            assert node.status is TaskStatus.running and not node.holds_slot

    @invariant()
    def live_and_cancels(self) -> None:
        core = self.core
        assert set(core.live) == {n.path for n in self.nodes if not n.resolved}
        for node in self.nodes:
            if node.resolved and node.cancel_called:
                assert core.ended_cancels.get(node.path) is node


TestCore = CoreMachine.TestCase
