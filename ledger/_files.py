"""Ledger files on disk: created private (0600), written by one sink at a time.

A ledger holds prompts, tool arguments and tool output, so a file a sink
creates is readable by its owner only, whatever the umask. An existing
file keeps the mode its owner gave it.

The single-writer rule is an exclusive ``flock`` held while a sink is open:
on the JSON Lines file itself, and on ``<database>-lock`` beside an SQLite
ledger (SQLite's own POSIX locks on the database are dropped when any
descriptor of it in the process is closed, so the database file itself is
never opened here once it exists). The kernel releases the lock when its
holder closes the file or dies, even by SIGKILL. Sync; no trio.
"""

from __future__ import annotations

import fcntl
import os
from typing import Final

FILE_MODE: Final = 0o600
"""The mode of every file a sink creates: read and write for its owner only."""

LOCKED: Final = (
    "another sink is writing to it (in this process or another);"
    " a ledger takes one writer at a time"
)
"""The cause of the :class:`ledger.SinkError` a second writer gets."""

_ATTEMPTS = 3


def open_private(path: str, flags: int) -> int:
    """Open ``path`` with ``flags``, creating it with mode 0600 if it is missing.

    The mode is set with ``fchmod`` after creation, so the umask does not
    change it.

    Raises:
      OSError: It can be neither created nor opened.
    """
    for attempt in range(_ATTEMPTS):
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
        except FileExistsError:
            pass
        else:
            try:
                os.fchmod(fd, FILE_MODE)
            except BaseException:
                os.close(fd)
                raise
            return fd
        try:
            return os.open(path, flags | os.O_CLOEXEC)
        except FileNotFoundError:
            if attempt == _ATTEMPTS - 1:
                raise  # removed each time between the two opens, or a dangling symlink
    raise AssertionError("unreachable")


def create_private(path: str) -> None:
    """Create an empty file at ``path`` with mode 0600, unless something is there.

    Raises:
      OSError: It cannot be created.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def try_lock(fd: int) -> bool:
    """Take the writer's lock (an exclusive ``flock``) on ``fd`` without waiting.

    Returns:
      ``False`` if another open file holds it.

    Raises:
      OSError: The file system cannot lock.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def lock_path(database: str) -> str:
    """The lock file beside an SQLite database (a ledger, or subagent's checkpoints):
    beside the file the name resolves to, symbolic links followed, so that two
    writers naming one database by two paths take the same lock."""
    return f"{os.path.realpath(database)}-lock"
