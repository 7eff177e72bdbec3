"""The head of a hash chain, which links records into entries (pure, no I/O)."""

from __future__ import annotations

import attrs

from ._encoding import GENESIS, canonical_body, hash_body, is_empty_kind
from ._entry import Entry, Record


@attrs.define(eq=False)
class Chain:
    """The state a sink needs to append to a chain: the last seq and hash.

    ``Chain()`` starts a new chain; ``Chain(seq, head)`` continues one whose
    last entry has sequence number ``seq`` and hash ``head``.
    """

    seq: int = 0
    """The sequence number of the last entry (0 before the first)."""
    head: str = GENESIS
    """The hash of the last entry (:data:`GENESIS` before the first)."""

    def link(self, record: Record, time: str) -> tuple[Entry, str]:
        """Chain ``record`` (already redacted) as the next entry.

        Advances the chain only once the entry is built, so a failure leaves
        the chain unchanged.

        Returns:
          The entry and its canonical body (see :mod:`ledger._encoding`).

        Raises:
          ValueError: ``record.kind`` is empty or ``record.duration`` is not finite.
          TypeError: A field of ``record`` cannot be encoded.
        """
        if is_empty_kind(record.kind):
            raise ValueError("an entry's kind must be a non-empty string")
        seq = self.seq + 1
        prev = self.head
        body = canonical_body(seq, time, record, prev)
        digest = hash_body(body)
        r = record
        entry = Entry(
            seq,
            time,
            r.kind,
            r.run_id,
            r.path,
            r.agent_id,
            r.tool,
            r.call_id,
            r.arguments,
            r.verdict,
            r.reason,
            r.result,
            r.error,
            r.duration,
            r.data,
            prev,
            digest,
        )
        self.seq = seq
        self.head = digest
        return entry, body

    def rewind(self, seq: int, head: str) -> None:
        """Move the chain's head back to entry ``seq`` with hash ``head``.

        Sinks use it when entries they linked could not be stored.
        """
        self.seq = seq
        self.head = head
