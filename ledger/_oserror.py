"""Describing OS and database errors in sink error messages."""

from __future__ import annotations

import sqlite3


def describe(exc: BaseException) -> str:
    """Return ``exc`` as a short cause: ``[Errno 28] No space left on device``, or
    SQLite's message, with its extended code where the message alone says nothing of
    the cause (``disk I/O error (SQLITE_IOERR_SHMSIZE)``: the WAL index could not be
    grown, as on a full disk)."""
    if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
        return f"[Errno {exc.errno}] {exc.strerror}"
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", None)
        if isinstance(name, str) and name.startswith("SQLITE_IOERR_"):
            return f"{exc} ({name})"
    return str(exc) or type(exc).__name__
