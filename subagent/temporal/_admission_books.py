"""The admission workflow's books: who holds a slot, who waits, what was released early.

Pure bookkeeping (no Temporal calls, no clock), so the rules can be run by a
hypothesis state machine and replayed deterministically by the workflow. Methods
change the books and queue :class:`Outgoing` answers in ``outbox``; the workflow
sends them (the shell carries out what the books decide).

**Tickets.** A root asks with a :class:`Ticket`: its workflow id, the first run id
of its run chain (``workflow.info().first_execution_run_id``: a reset keeps it, a new
workflow reusing the id does not) and its admission number (0, then 1, 2, ... each
time a paused root asks again to resume). The books key a root by ``(workflow id,
chain)`` and hold at most one number per key, so:

- a repeated ``acquire`` changes nothing (a holder gets its grant again, in case the
  first one was lost to a reset); an older number than the one held is ignored;
- a ``release`` frees only the slot (or queue place) of its own key, never another
  root's, and leaves a *tombstone* (the highest number released per key): an
  ``acquire`` it overtook, or one delivered again, is then ignored (no slot leaks);
  tombstones are bounded (the oldest go first; a root released more than
  ``max_tombstones`` releases ago is then only caught by the liveness check) and
  are dropped when their root is found closed;
- :meth:`Books.reclaim` frees everything of roots found closed (terminated, timed
  out, reset away), whose ``finally`` never ran.

Invariant (checked by :meth:`Books.check`): at most ``limit`` holders; no key both
holds and waits; at most ``max_queue`` waiting; at most ``max_tombstones`` tombstones.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

#: The answer of a grant (anything else is a refusal, naming why).
GRANTED = "granted"
#: Roots waiting for a slot beyond which an ``acquire`` is refused, by default.
DEFAULT_MAX_QUEUE = 1000
#: Early releases remembered (against the acquire they overtook), by default.
DEFAULT_MAX_TOMBSTONES = 1000
#: Longest workflow id or run id accepted in a ticket (Temporal's own id limit).
MAX_ID = 1000

Key = tuple[str, str]


@dataclass(frozen=True)
class Ticket:
    """One admission request of a root: who asks (its workflow id and first run id,
    the run chain) and the how-manieth time (``number``, from 0)."""

    workflow_id: str
    run_id: str
    number: int = 0

    @property
    def key(self) -> Key:
        """The root the ticket belongs to: ``(workflow_id, run_id)``."""
        return (self.workflow_id, self.run_id)


@dataclass(frozen=True)
class AdmissionAnswer:
    """The admission workflow's answer to ticket ``number``: ``"granted"`` or why not."""

    number: int
    answer: str


@dataclass(frozen=True)
class Outgoing:
    """An answer to send to the root of ``ticket``."""

    ticket: Ticket
    answer: str


@dataclass(frozen=True)
class Carried:
    """The books as they cross a continue-as-new (in grant / queue / age order)."""

    holders: list[Ticket] = field(default_factory=list)
    waiting: list[Ticket] = field(default_factory=list)
    tombstones: list[Ticket] = field(default_factory=list)
    outbox: list[Outgoing] = field(default_factory=list)
    reclaimed: int = 0
    runs: int = 1
    checks: int = 0


def valid_ticket(ticket: object) -> bool:
    """Whether ``ticket`` (from a signal: outside input) is a well-formed :class:`Ticket`."""
    return (
        isinstance(ticket, Ticket)
        and isinstance(ticket.workflow_id, str) and 0 < len(ticket.workflow_id) <= MAX_ID
        and isinstance(ticket.run_id, str) and len(ticket.run_id) <= MAX_ID
        and isinstance(ticket.number, int) and not isinstance(ticket.number, bool)
        and 0 <= ticket.number < 2**31
    )


class Books:
    """Holders, the FIFO queue and tombstones of one admission workflow (see the module).

    ``holders`` and ``waiting`` map a root's key to its ticket number, in grant and
    queue order; ``reclaimed`` counts the roots freed because they were found closed,
    ``checks`` the liveness checks that answered.
    """

    def __init__(self, limit: int, max_queue: int = DEFAULT_MAX_QUEUE,
                 max_tombstones: int = DEFAULT_MAX_TOMBSTONES) -> None:
        self.limit = max(1, limit)
        self.max_queue = max(0, max_queue)
        self.max_tombstones = max(1, max_tombstones)
        self.holders: dict[Key, int] = {}
        self.waiting: dict[Key, int] = {}
        self.tombstones: dict[Key, int] = {}
        self.outbox: deque[Outgoing] = deque()
        self.reclaimed = 0
        self.checks = 0

    # -- requests --------------------------------------------------------------------

    def acquire(self, ticket: Ticket) -> None:
        """A root asks for a slot (queued FIFO; granted at once if one is free)."""
        key, number = ticket.key, ticket.number
        if self.tombstones.get(key, -1) >= number:
            return  # released already: this acquire was overtaken
        held = self.holders.get(key)
        if held is not None:
            if held <= number:  # a repeat, or the root asks again (its release was lost)
                self.holders[key] = number
                self.outbox.append(Outgoing(ticket, GRANTED))
            return
        queued = self.waiting.get(key)
        if queued is not None:
            self.waiting[key] = max(queued, number)
            return
        if len(self.waiting) >= self.max_queue:
            self.outbox.append(Outgoing(ticket, f"the admission queue is full "
                                                f"({self.max_queue} waiting)"))
            return
        self.waiting[key] = number
        self._grant()

    def release(self, ticket: Ticket) -> None:
        """A root gives its slot (or queue place) of ``ticket`` back; never another's.

        The release is remembered (a tombstone): an acquire of the same or an older
        number that arrives later (overtaken, or delivered again) is ignored."""
        key, number = ticket.key, ticket.number
        for books in (self.holders, self.waiting):
            held = books.get(key)
            if held is not None and held > number:
                return  # a late release of an older ticket: the newer one stands
        self._bury(key, number)
        if self.holders.pop(key, None) is not None or self.waiting.pop(key, None) is not None:
            self._grant()

    def undeliverable(self, out: Outgoing) -> None:
        """The answer ``out`` could not be sent (its root is gone): free its grant."""
        key = out.ticket.key
        if out.answer == GRANTED and self.holders.get(key) == out.ticket.number:
            del self.holders[key]
            self._grant()

    def reclaim(self, closed: Iterable[Key]) -> None:
        """Free everything of the roots ``closed`` (found closed: terminated, timed out,
        reset away), and forget their tombstones."""
        self.checks += 1
        for key in closed:
            if self.holders.pop(key, None) is not None:
                self.reclaimed += 1
            self.waiting.pop(key, None)
            self.tombstones.pop(key, None)
        self._grant()

    # -- reading -----------------------------------------------------------------------

    def tracked(self) -> bool:
        """Whether any root holds a slot or waits (the liveness check runs only then)."""
        return bool(self.holders or self.waiting)

    def to_check(self, count: int, start: int = 0) -> list[Key]:
        """Up to ``count`` keys to check for liveness: holders, then waiting roots, then
        tombstones, rotated by ``start`` so every key comes up in turn."""
        keys = [*self.holders, *self.waiting, *self.tombstones]
        if not keys:
            return []
        start %= len(keys)
        return (keys[start:] + keys[:start])[:count]

    def carry(self, runs: int) -> Carried:
        """The books to continue as new with."""
        return Carried(
            [Ticket(w, r, n) for (w, r), n in self.holders.items()],
            [Ticket(w, r, n) for (w, r), n in self.waiting.items()],
            [Ticket(w, r, n) for (w, r), n in self.tombstones.items()],
            list(self.outbox), self.reclaimed, runs, self.checks,
        )

    def restore(self, carried: Carried) -> None:
        """Take over the books of the previous run (then grant what is free)."""
        self.holders = {t.key: t.number for t in carried.holders if valid_ticket(t)}
        self.waiting = {t.key: t.number for t in carried.waiting if valid_ticket(t)}
        self.tombstones = {t.key: t.number for t in carried.tombstones if valid_ticket(t)}
        self.outbox = deque(carried.outbox)
        self.reclaimed = carried.reclaimed
        self.checks = carried.checks
        self._grant()

    def check(self) -> None:
        """Assert the invariant (see the module)."""
        assert len(self.holders) <= self.limit, (self.holders, self.limit)
        assert not self.holders.keys() & self.waiting.keys()
        assert len(self.waiting) <= self.max_queue
        assert len(self.tombstones) <= self.max_tombstones
        assert len(self.holders) == self.limit or not self.waiting

    # -- rules -------------------------------------------------------------------------

    def _grant(self) -> None:
        while len(self.holders) < self.limit and self.waiting:
            key = next(iter(self.waiting))
            number = self.waiting.pop(key)
            self.holders[key] = number
            self.outbox.append(Outgoing(Ticket(key[0], key[1], number), GRANTED))

    def _bury(self, key: Key, number: int) -> None:
        older = self.tombstones.pop(key, -1)  # re-inserted: the youngest last
        self.tombstones[key] = max(number, older)
        while len(self.tombstones) > self.max_tombstones:
            del self.tombstones[next(iter(self.tombstones))]
