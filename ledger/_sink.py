"""The :class:`Sink` protocol and the statistics every stock sink reports."""

from __future__ import annotations

import os
from typing import Protocol

import attrs

from ._entry import Entry, Record


class Sink(Protocol):
    """Where audit entries go. Safe to use from many tasks at once.

    A sink whose recording never blocks may also offer a synchronous
    ``record_nowait(record) -> None`` (:meth:`ledger.MemorySink.record_nowait`
    and :meth:`ledger.JsonlSink.record_nowait`, which writes the entry's line
    before it returns, are the stock ones): the same checks, order and acknowledged entries as
    :meth:`record`, not a checkpoint, raising ``trio.WouldBlock`` (having
    recorded nothing) for a record it can only take by waiting. The library's
    recorders call it when it is there (an audit entry recorded into a sink
    that never blocks need not be a trio checkpoint) and fall back to
    ``await record(...)`` otherwise.

    Such a sink may further offer ``record_fields_nowait(kind, run_id, path,
    agent_id, tool, call_id, arguments, verdict, reason, result, error,
    duration, data) -> None`` (:meth:`ledger.MemorySink.record_fields_nowait`,
    and :meth:`ledger.JsonlSink.record_fields_nowait`, which encodes the line
    straight from the fields):
    ``record_nowait`` of the record of those fields, without the
    :class:`Record` (``data`` a dict given away, or ``None``). A run's and a
    task's own entries are offered this way first, so that no ``Record`` is
    built on their hot path.

    A fast path is taken only when the sink's own class provides it
    consistently: ``record_nowait`` stands for ``record`` and
    ``record_fields_nowait`` for both, so each is called only when it is
    defined in the class that defines the methods it stands for, or in a
    subclass of it. A subclass of :class:`ledger.MemorySink` that overrides
    ``record`` (to forward, filter, or fail closed) has that override awaited
    for every entry, never the inherited ``record_nowait``; one that overrides
    ``record_nowait`` has it called, never the inherited
    ``record_fields_nowait``.
    """

    async def record(self, record: Record) -> Entry | None:
        """Redact, chain and store ``record``; return once the entry is as
        durable as the sink promises (each sink's docstring says what an
        acknowledged entry is). A checkpoint.

        Returns:
          The entry, or ``None`` from a sink that builds entries later
          (:class:`ledger.MemorySink` chains them when they are read).
        """
        ...

    async def aclose(self) -> None:
        """Release the sink's resources. Idempotent; a checkpoint."""
        ...


def to_path(path: str | os.PathLike[str]) -> str:
    """Return a sink's path argument as a str."""
    return os.fspath(path)


@attrs.frozen
class SinkStatistics:
    """A snapshot of a stock sink's counters."""

    recorded: int
    """Entries this sink has stored since it was created."""
    last_seq: int
    """The sequence number of the chain's last entry (0 before the first)."""
    transactions: int = 0
    """Committed SQLite transactions (group commit: far fewer than entries)."""
    fsyncs: int = 0
    """``fsync`` calls (a JSON Lines sink with ``fsync=True``; group sync)."""
    closed: bool = False
    """Whether ``aclose()`` was called."""
