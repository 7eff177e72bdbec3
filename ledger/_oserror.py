"""Describing OS and database errors in sink error messages."""

from __future__ import annotations


def describe(exc: BaseException) -> str:
    """Return ``exc`` as a short cause: ``[Errno 28] No space left on device``."""
    if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
        return f"[Errno {exc.errno}] {exc.strerror}"
    return str(exc) or type(exc).__name__
