"""The ledger's one error hierarchy, rooted in :class:`LedgerError`."""

from __future__ import annotations


class LedgerError(Exception):
    """Base class of every error the ledger raises."""


class SinkClosedError(LedgerError):
    """``record()`` was called on a sink after its ``aclose()`` (local misuse)."""


class SinkError(LedgerError):
    """A sink's storage failed: disk full, permission denied, database locked, ...

    The entry being recorded was not stored, and no entry that an earlier
    ``record()`` reported recorded was lost. Recording again later may succeed
    once the cause is fixed.

    Attributes:
      path: The ledger file the sink writes.
      cause: What went wrong, in words.
    """

    def __init__(self, path: str, cause: str) -> None:
        super().__init__(f"cannot record to ledger {path}: {cause}")
        self.path = path
        self.cause = cause


class VerifyError(LedgerError):
    """A ledger could not be read at all (missing, unreadable, not a ledger).

    A ledger that can be read but is damaged or tampered with is not an error:
    :func:`ledger.verify` returns a report saying what is wrong.
    """
