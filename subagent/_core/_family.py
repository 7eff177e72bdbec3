"""The pool core's rules between a task and its children: the fan-out bound
(``max_children``), background delivery of results into the parent's run, and the
roll-up of tree usage. Sans-IO: no trio, no I/O; :class:`subagent._core._core.PoolCore`
inherits these methods, and they follow its contract (check, then change, then
return the effects; an illegal move raises :class:`IllegalTransition` and changes
nothing).

The state is per node (see :class:`subagent._core._node.Node`): ``fanout_limit``,
``fanout_used``, ``fanout_waiters`` and ``holds_fanout``; ``deliver_to``,
``background`` and ``unread``; ``usage``, ``child_usage`` and ``sealed``.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Generic

from ._node import TRANSITIONS, Arrived, Effect, H, IllegalTransition, Node, WakeFanout


def add_usage(one: Any, other: Any) -> Any:
    """``one + other``, where None is nothing (usage values are opaque to the core)."""
    if one is None:
        return other
    if other is None:
        return one
    return one + other


class FamilyRules(Generic[H]):
    """Fan-out, background delivery and usage roll-up (mixed into ``PoolCore``)."""

    # -- fan-out: at most fanout_limit live children per node ------------------------

    def claim_fanout(self, parent: Node[H]) -> bool:
        """Take one of ``parent``'s fan-out slots for a child about to be submitted:
        True if one was free (the claim then goes to :meth:`accept` with
        ``fanout=True``, or back with :meth:`release_fanout`), else False (park it)."""
        if parent.resolved:
            raise IllegalTransition(f"{parent!r} has resolved: it has no fan-out slots")
        if parent.fanout_used >= parent.fanout_limit:
            return False
        parent.fanout_used += 1
        if __debug__:
            self._check_fanout(parent)
        return True

    def park_fanout(self, parent: Node[H], token: object) -> None:
        """A claim waits for one of ``parent``'s fan-out slots (``token``: what to
        wake). The slot is handed to it by a :class:`WakeFanout`."""
        if parent.fanout_used < parent.fanout_limit:
            raise IllegalTransition(f"{parent!r} has a free fan-out slot: claim it")
        if parent.fanout_waiters is None:
            parent.fanout_waiters = deque()
        parent.fanout_waiters.append(token)

    def withdraw_fanout(self, parent: Node[H], token: object) -> None:
        """A parked claim was cancelled before it got a slot: forget it."""
        if parent.fanout_waiters is None or token not in parent.fanout_waiters:
            raise IllegalTransition(f"no claim of {parent!r} is parked as {token!r}")
        parent.fanout_waiters.remove(token)

    def release_fanout(self, parent: Node[H]) -> list[Effect[H]]:
        """A claimed fan-out slot of ``parent`` is given back unused (its submit
        failed or was cancelled)."""
        if parent.fanout_used < 1:
            raise IllegalTransition(f"{parent!r} has no fan-out slot claimed")
        effects: list[Effect[H]] = []
        self._free_fanout(parent, effects)
        return effects

    def _free_fanout(self, parent: Node[H], effects: list[Effect[H]]) -> None:
        # Like a semaphore's release: the slot goes straight to the first parked claim.
        waiters = parent.fanout_waiters
        if waiters:
            effects.append(WakeFanout(waiters.popleft()))
        else:
            parent.fanout_used -= 1
        if __debug__:
            self._check_fanout(parent)

    def _check_fanout(self, node: Node[H]) -> None:
        assert 0 <= node.fanout_used <= node.fanout_limit, node
        assert not node.fanout_waiters or node.fanout_used == node.fanout_limit, node

    def _adopt(self, node: Node[H], fanout: bool, background: bool) -> None:
        # The family side of accept (before any change): a claimed fan-out slot goes
        # to the child, and a background child delivers into its parent's run.
        parent = node.parent
        if (fanout or background) and parent is None:
            raise IllegalTransition(f"{node!r} has no parent to hold a fan-out slot of")
        if fanout:
            assert parent is not None
            if parent.fanout_used < 1:
                raise IllegalTransition(f"no fan-out slot of {parent!r} was claimed")
            node.holds_fanout = True
        if background:
            assert parent is not None
            node.deliver_to = parent
            parent.background[node] = None

    # -- background delivery -----------------------------------------------------------

    def to_background(self, parent: Node[H], child: Node[H]) -> None:
        """``child`` (of ``parent``, waited for until now) goes on in the background:
        its result is delivered into ``parent``'s run, or orphaned."""
        if child.parent is not parent or child.deliver_to is not None or child.resolved:
            raise IllegalTransition(f"{child!r} cannot go to the background of {parent!r}")
        child.deliver_to = parent
        parent.background[child] = None
        if __debug__:
            self._check_delivery(parent)

    def settle(self, node: Node[H], inbox_open: bool) -> tuple[bool, list[Effect[H]]]:
        """Account for ``node`` after it reported its end (its run ended, it sealed,
        it has not resolved): its fan-out slot goes back to its parent (or straight
        to a parked claim), its tree usage is added to its parent's unless the
        parent has sealed, and a background child's result goes into its parent's
        inbox when ``inbox_open`` (the shell's view of the parent's run).

        Returns:
          False when the result is an orphan (a background child whose parent's run
          has ended: the shell reports it), else True; and the effects.
        """
        target = node.deliver_to
        if node.status in TRANSITIONS or node.resolved or not node.sealed:
            raise IllegalTransition(f"{node!r} cannot settle now")
        if target is not None and node not in target.background:
            raise IllegalTransition(f"{node!r} has settled already")
        effects: list[Effect[H]] = []
        parent = node.parent
        if node.holds_fanout:
            assert parent is not None
            node.holds_fanout = False
            self._free_fanout(parent, effects)
        if parent is not None and not parent.sealed:
            parent.child_usage = add_usage(parent.child_usage, self.tree_usage(node))
        if target is None:
            return True, effects
        del target.background[node]
        effects.append(Arrived(target))
        if inbox_open:
            target.unread.append(node)
        if __debug__:
            self._check_delivery(target)
        return inbox_open, effects

    def read(self, parent: Node[H], child: Node[H]) -> None:
        """``parent``'s run read ``child``'s result from its inbox."""
        if child not in parent.unread:
            raise IllegalTransition(f"{child!r} is not unread in {parent!r}")
        parent.unread.remove(child)

    def take_unread(self, node: Node[H]) -> list[Node[H]]:
        """``node``'s run has ended: the results it did not read (orphans now)."""
        unread, node.unread = node.unread, []
        return unread

    def _check_delivery(self, node: Node[H]) -> None:
        assert all(c.deliver_to is node for c in node.background), node
        assert all(c.deliver_to is node for c in node.unread), node
        assert not set(node.unread) & set(node.background), node

    # -- usage -------------------------------------------------------------------------

    def seal(self, node: Node[H], usage: Any) -> None:
        """``node``'s run has ended with ``usage`` (None: it did not run) and it is
        about to report its end: later children's usage is no longer added."""
        if node.sealed or node.status in TRANSITIONS:
            raise IllegalTransition(f"{node!r} cannot seal now")
        node.usage = usage
        node.sealed = True

    @staticmethod
    def tree_usage(node: Node[H]) -> Any:
        """``node``'s own usage (once sealed) plus that of its children that settled
        before it sealed (their tree usage, recursively); None for none."""
        return add_usage(node.usage, node.child_usage)
