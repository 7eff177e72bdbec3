"""The admission books under random interleavings: messages reordered and duplicated,
roots cancelled, paused, terminated and reclaimed (a hypothesis state machine on
the pure rules the workflow replays)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from subagent.temporal._admission_books import (
    GRANTED,
    Books,
    Carried,
    Outgoing,
    Ticket,
    valid_ticket,
)

LIMIT = 2
ROOTS = 3


@dataclass
class Root:
    """A root as the workflow runs it: asks with ticket ``number``, runs once granted,
    releases, maybe asks again (a pause), or dies (terminated)."""

    workflow_id: str
    number: int = -1
    state: str = "idle"  # idle, asking, running, done, dead

    def ticket(self) -> Ticket:
        return Ticket(self.workflow_id, "chain-" + self.workflow_id, self.number)


class AdmissionMachine(RuleBasedStateMachine):
    """Roots talk to the books through a network that reorders and duplicates."""

    def __init__(self) -> None:
        super().__init__()
        self.books = Books(LIMIT, max_queue=3, max_tombstones=100)
        self.roots = [Root(f"r{i}") for i in range(ROOTS)]
        self.network: list[tuple[str, Ticket]] = []

    # -- roots -------------------------------------------------------------------------

    def pick(self, data: st.DataObject, *states: str) -> Root:
        return data.draw(st.sampled_from([r for r in self.roots if r.state in states]))

    def some(self, *states: str) -> bool:
        return any(r.state in states for r in self.roots)

    @precondition(lambda self: self.some("idle"))
    @rule(data=st.data())
    def ask(self, data: st.DataObject) -> None:
        root = self.pick(data, "idle")
        root.number += 1
        root.state = "asking"
        self.network.append(("acquire", root.ticket()))

    @precondition(lambda self: self.some("asking", "running"))
    @rule(data=st.data(), pause=st.booleans())
    def finish_or_cancel(self, data: st.DataObject, pause: bool) -> None:
        """A running root ends (or pauses); an asking one is cancelled: both release
        (a cancelled root's release may overtake its acquire in the network)."""
        root = self.pick(data, "asking", "running")
        self.network.append(("release", root.ticket()))
        root.state = "idle" if pause else "done"

    @precondition(lambda self: self.some("idle", "asking", "running"))
    @rule(data=st.data())
    def terminate(self, data: st.DataObject) -> None:
        self.pick(data, "idle", "asking", "running").state = "dead"

    @rule(data=st.data())
    def liveness_check(self, data: st.DataObject) -> None:
        """The check finds some of the dead roots (never a live one)."""
        dead = [r.ticket().key for r in self.roots if r.state in ("dead", "done")]
        found = data.draw(st.lists(st.sampled_from(dead), unique=True)) if dead else []
        self.books.reclaim(found)

    # -- the network -------------------------------------------------------------------

    @precondition(lambda self: bool(self.network))
    @rule(data=st.data(), duplicate=st.booleans())
    def deliver(self, data: st.DataObject, duplicate: bool) -> None:
        """Any message in flight arrives (any order); sometimes it arrives twice."""
        index = data.draw(st.integers(0, len(self.network) - 1))
        kind, ticket = self.network[index] if duplicate else self.network.pop(index)
        getattr(self.books, kind)(ticket)

    @precondition(lambda self: bool(self.books.outbox))
    @rule()
    def answer(self) -> None:
        """The workflow sends its next answer; a dead root cannot take it."""
        out = self.books.outbox.popleft()
        root = next(r for r in self.roots if r.workflow_id == out.ticket.workflow_id)
        if root.state in ("dead", "done"):
            self.books.undeliverable(out)
        elif root.state == "asking" and out.ticket.number == root.number:
            root.state = "running" if out.answer == GRANTED else "done"

    @rule()
    def continue_as_new(self) -> None:
        carried = self.books.carry(1)
        self.books = Books(LIMIT, max_queue=3, max_tombstones=100)
        self.books.restore(carried)

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def bounded(self) -> None:
        self.books.check()
        running = [r for r in self.roots if r.state == "running"]
        assert len(running) <= LIMIT
        for root in running:  # a running root always holds its slot in the books
            assert self.books.holders.get(root.ticket().key) == root.number
        for books in (self.books.holders, self.books.waiting):
            for (workflow_id, _), number in books.items():  # and no live root holds a
                root = self.roots[int(workflow_id[1:])]  # slot or place it let go of
                if root.state in ("dead", "done"):
                    continue  # closed: reclaimed by the liveness check
                ticket = Ticket(workflow_id, "chain-" + workflow_id, number)
                assert ((root.number == number and root.state in ("asking", "running"))
                        or ("release", ticket) in self.network
                        or Outgoing(ticket, GRANTED) in self.books.outbox), (root, number)

    def teardown(self) -> None:
        """Settle: every live root ends, every message and answer arrives, the check
        finds every closed root: then nothing is held and nobody waits (no leak)."""
        for root in self.roots:
            if root.state in ("asking", "running"):
                self.network.append(("release", root.ticket()))
                root.state = "done"
        while self.network:
            kind, ticket = self.network.pop()
            getattr(self.books, kind)(ticket)
        while self.books.outbox:
            self.books.undeliverable(self.books.outbox.popleft())
        terminated = [r.ticket().key for r in self.roots if r.state == "dead"]
        # Only terminated roots (no release) may still hold or wait, until reclaimed.
        assert set(self.books.holders) | set(self.books.waiting) <= set(terminated)
        self.books.reclaim(r.ticket().key for r in self.roots)
        while self.books.outbox:
            self.books.undeliverable(self.books.outbox.popleft())
        assert (self.books.holders, self.books.waiting, self.books.tombstones) == ({}, {}, {})
        self.books.check()


AdmissionMachine.TestCase.settings = settings(stateful_step_count=30)
TestAdmissionMachine = pytest.mark.slow(AdmissionMachine.TestCase)


def t(number: int, who: str = "a") -> Ticket:
    return Ticket(who, "run-" + who, number)


def test_a_release_that_overtakes_its_acquire_leaks_nothing() -> None:
    books = Books(1)
    books.release(t(0))
    books.acquire(t(0))
    assert (books.holders, books.waiting, list(books.outbox)) == ({}, {}, [])
    assert books.tombstones == {("a", "run-a"): 0}
    books.acquire(t(0, "b"))
    assert books.holders == {("b", "run-b"): 0}


def test_a_repeated_acquire_holds_one_slot_and_repeats_the_grant() -> None:
    books = Books(2)
    books.acquire(t(0))
    books.acquire(t(0))
    assert books.holders == {("a", "run-a"): 0}
    assert list(books.outbox) == [Outgoing(t(0), GRANTED)] * 2
    books.acquire(t(0, "b"))
    books.acquire(t(0, "c"))
    books.acquire(t(0, "c"))
    assert books.waiting == {("c", "run-c"): 0}


def test_a_release_frees_only_its_own_slot() -> None:
    books = Books(1)
    books.acquire(t(1))
    books.release(Ticket("a", "another-chain", 1))  # same id, another run chain
    books.release(t(1, "b"))
    books.release(t(0))  # an older ticket of the holder
    assert books.holders == {("a", "run-a"): 1}
    books.release(t(1))
    books.acquire(t(1))  # delivered again after its release
    assert books.holders == {}


def test_reclaim_frees_a_closed_holder_for_the_next_in_line() -> None:
    books = Books(1)
    books.acquire(t(0))
    books.acquire(t(0, "b"))
    books.outbox.clear()
    books.reclaim([("a", "run-a")])
    assert (books.holders, books.waiting, books.reclaimed) == ({("b", "run-b"): 0}, {}, 1)
    assert list(books.outbox) == [Outgoing(t(0, "b"), GRANTED)]


def test_tombstones_are_bounded_oldest_first() -> None:
    books = Books(1, max_tombstones=2)
    for who in "abc":
        books.release(t(0, who))
    assert list(books.tombstones) == [("b", "run-b"), ("c", "run-c")]


def test_the_books_cross_a_continue_as_new_unchanged() -> None:
    books = Books(1, max_queue=5)
    books.acquire(t(0))
    books.acquire(t(2, "b"))
    books.release(t(0, "c"))
    again = Books(1, max_queue=5)
    again.restore(books.carry(3))
    assert (again.holders, again.waiting, again.tombstones, list(again.outbox)) == (
        books.holders, books.waiting, books.tombstones, list(books.outbox))
    assert books.carry(3) == Carried([t(0)], [t(2, "b")], [t(0, "c")],
                                     [Outgoing(t(0), GRANTED)], 0, 3, 0)


def test_malformed_tickets_are_refused() -> None:
    assert valid_ticket(t(0))
    for bad in (None, "a", Ticket("", "r", 0), Ticket("a", "r", -1), Ticket("a", "r", True),
                Ticket("a" * 1001, "r", 0), Ticket("a", 5, 0)):  # type: ignore[arg-type]
        assert not valid_ticket(bad)
