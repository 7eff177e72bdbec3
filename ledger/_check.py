"""Chain checking: find and name the first bad entry of a sequence (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import attrs

from ._encoding import GENESIS, entry_hash
from ._entry import Entry

EDITED: Final = "edited"
INSERTED: Final = "inserted"
DELETED: Final = "deleted"
REORDERED: Final = "reordered"
DUPLICATED: Final = "duplicated"
MALFORMED: Final = "malformed"
NOT_CANONICAL: Final = "not canonical"
TORN: Final = "torn last line"
HEAD_MISSING: Final = "pinned head missing"


@attrs.frozen
class Flaw:
    """A stored entry that decodes, but whose stored form a sink never writes."""

    kind: str
    """The problem it is (:data:`NOT_CANONICAL`)."""
    detail: str
    """What is wrong with it, e.g. ``"member 'result' appears twice"``."""


Item = Entry | Flaw | str
"""A stored entry, decoded; a :class:`Flaw` found in its stored form; or the
reason it could not be decoded."""


@attrs.frozen
class Problem:
    """The first thing wrong with a chain."""

    seq: int
    """The first bad sequence number (the position where the chain breaks)."""
    kind: str
    """``"edited"``, ``"inserted"``, ``"deleted"``, ``"reordered"``,
    ``"duplicated"``, ``"malformed"``, ``"not canonical"``, ``"torn last
    line"`` or ``"pinned head missing"``."""
    detail: str
    """What is wrong, in a sentence."""


@attrs.frozen
class ChainCheck:
    """The result of :func:`check_chain`."""

    sound: int
    """How many entries, from the first, form a sound chain."""
    head: str
    """The hash of the last sound entry (:data:`GENESIS` if none)."""
    problem: Problem | None
    """The first problem, or ``None`` if every entry is sound."""
    pinned_seq: int | None = None
    """The sequence number of the sound entry whose hash is the ``pinned`` head
    given to :func:`check_chain` (0 for :data:`GENESIS`), or ``None``."""


def _sound(item: Item, seq: int, prev_hash: str) -> bool:
    return (
        isinstance(item, Entry)
        and item.seq == seq
        and item.prev_hash == prev_hash
        and entry_hash(item) == item.hash
    )


def check_chain(items: Sequence[Item], *, pinned: str | None = None) -> ChainCheck:
    """Check that ``items`` form one chain from sequence number 1.

    Entry ``i`` (1-based) must have ``seq == i``, the hash of entry ``i - 1``
    (:data:`GENESIS` for the first) as ``prev_hash``, and the hash of its own
    canonical encoding as ``hash``. At the first entry that does not, the
    neighbourhood is examined to name what happened.

    Args:
      items: The stored entries, in storage order.
      pinned: A head recorded earlier: the result says which sound entry has
        this hash (``pinned_seq``).
    """
    prev_hash = GENESIS
    found = 0 if pinned == GENESIS else None
    for index in range(len(items)):
        if not _sound(items[index], index + 1, prev_hash):
            return ChainCheck(index, prev_hash, _diagnose(items, index, prev_hash), found)
        item = items[index]
        assert isinstance(item, Entry)
        prev_hash = item.hash
        if prev_hash == pinned:
            found = index + 1
    return ChainCheck(len(items), prev_hash, None, found)


def _diagnose(items: Sequence[Item], index: int, prev_hash: str) -> Problem:
    """Name what is wrong at ``items[index]``, the first entry that is not sound."""
    seq = index + 1
    item = items[index]
    count = len(items)
    if isinstance(item, Entry) and 1 <= item.seq < seq and items[item.seq - 1] == item:
        return Problem(seq, DUPLICATED, f"entry {seq} is a copy of entry {item.seq}")
    if isinstance(item, Entry) and index > 0 and item.seq == seq - 1:
        before = items[index - 1]
        if (
            isinstance(before, Entry)
            and item.prev_hash == before.prev_hash
            and entry_hash(item) == item.hash
        ):
            # Two entries claim the same place; the one the chain goes on from is real.
            forged = seq - 1
            if index + 1 < count and not _sound(items[index + 1], seq, item.hash):
                forged = seq
            return Problem(
                forged,
                INSERTED,
                f"an entry was inserted at position {forged}: two entries claim seq {seq - 1}",
            )
    if isinstance(item, Entry) and item.seq > seq and entry_hash(item) == item.hash:
        for later in range(index + 1, count):
            if _sound(items[later], seq, prev_hash):
                return Problem(
                    seq, REORDERED, f"entry {seq} is out of order: it is at position {later + 1}"
                )
    if index + 1 < count and _sound(items[index + 1], seq, prev_hash):
        return Problem(
            seq, INSERTED, f"an entry was inserted at position {seq}, before the real entry {seq}"
        )
    if isinstance(item, str):
        return Problem(seq, MALFORMED, f"entry {seq} is malformed: {item}")
    if isinstance(item, Flaw):
        return Problem(seq, item.kind, f"entry {seq} is {item.kind}: {item.detail}")
    if entry_hash(item) != item.hash:
        return Problem(seq, EDITED, f"entry {seq} was edited: its hash does not match its content")
    if item.seq == seq:
        if index == 0:
            return Problem(seq, EDITED, "entry 1 was edited: it does not start a chain")
        if index + 1 == count or _sound(items[index + 1], seq + 1, item.hash):
            return Problem(
                seq - 1,
                EDITED,
                f"entry {seq - 1} was edited: entry {seq} records a different hash for it",
            )
        return Problem(seq, EDITED, f"entry {seq} was edited: it does not link to entry {seq - 1}")
    if item.seq > seq:
        if item.seq == seq + 1:
            return Problem(seq, DELETED, f"entry {seq} was deleted")
        return Problem(seq, DELETED, f"entries {seq} to {item.seq - 1} were deleted")
    return Problem(seq, REORDERED, f"entry {seq} is out of order: entry {item.seq} is in its place")
