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

A ledger is a regular file: a sink promises that an acknowledged entry is on disk,
and a FIFO with no reader that keeps what it reads, ``/dev/null``, a socket or a
directory holds nothing, so a sink refuses a path that names one
(:func:`open_regular`). A symbolic link is followed (users point a name at a ledger
kept elsewhere): what is checked is the file opened, on its descriptor. SQLite opens
its database by name, after the check (:func:`create_regular`): :func:`open_checked`
checks again once it has, so that a file swapped in between is refused as the check
refuses it, not with what SQLite says of it ("disk I/O error" for a FIFO).
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Callable
from typing import Final, Protocol, TypeAlias, TypeVar

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


_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFileError(OSError):
    """What a sink was given is not a regular file, or not the one it checked; the
    message says what it is (``it is a FIFO, not a regular file``, ``it was replaced
    while it was opened``). It has no errno: :func:`describe` gives its message."""


#: A file's identity: its ``(st_dev, st_ino)``.
FileId: TypeAlias = tuple[int, int]

REPLACED: Final = "it was replaced while it was opened"
"""What a file checked and then replaced by another regular file (or removed) before
SQLite opened it is called (see :func:`open_checked`)."""


def not_regular(mode: int) -> str:
    """What a file of ``mode`` (not a regular file) is, in words: ``it is a FIFO, not a
    regular file``."""
    kind = next((text for test, text in _KINDS if test(mode)), "not a file")
    return f"it is {kind}, not a regular file"


def _refuse(mode: int) -> NotRegularFileError:
    return NotRegularFileError(not_regular(mode))


def open_regular(path: str, flags: int) -> int:
    """:func:`open_private` for a file that must be a regular file: ``path`` is looked
    at first (a device is never opened), opened without blocking (``O_NONBLOCK``: a
    FIFO put in its place meanwhile is not waited on) and checked again on the open
    descriptor, which is what counts. A symbolic link is followed. ``O_NONBLOCK`` is
    cleared again on the descriptor returned.

    Raises:
      NotRegularFileError: It is a FIFO, a device, a socket or a directory.
      OSError: It can be neither created nor opened.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        pass  # created by the open, or a dangling symbolic link: the open says so
    else:
        if not stat.S_ISREG(mode):
            raise _refuse(mode)
    fd = open_private(path, flags | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refuse(mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_regular(path: str) -> FileId:
    """Create an empty file at ``path`` with mode 0600 unless one is there, and check
    that what is there is a regular file (see :func:`open_regular`).

    Returns:
      The file's identity, for :func:`open_checked`.

    Raises:
      NotRegularFileError: It is a FIFO, a device, a socket or a directory.
      OSError: It can be neither created nor opened.
    """
    fd = open_regular(path, os.O_RDONLY)
    try:
        found = os.fstat(fd)
    finally:
        os.close(fd)
    return found.st_dev, found.st_ino


class _Closable(Protocol):
    def close(self) -> None: ...


_C = TypeVar("_C", bound=_Closable)


def open_checked(path: str, checked: FileId, opener: Callable[[], _C]) -> _C:
    """``opener()``, which opens ``path`` by name again (SQLite's connect), after
    :func:`create_regular` checked it (``checked``: its identity); then ``path`` is
    looked at again (``stat``: no descriptor of the database is opened, so SQLite's
    POSIX locks are kept). Something swapped in at ``path`` between the check and
    the open is refused as the check refuses it, whether the opener failed on it
    (SQLite's "disk I/O error" on a FIFO) or took it (its connection is closed).

    Raises:
      NotRegularFileError: ``path`` now names a FIFO, a device, a socket or a
        directory (the check's message), or another file or none (:data:`REPLACED`).
      Exception: What ``opener`` raises, when ``path`` still names the file checked.
    """
    try:
        opened = opener()
    except BaseException:
        _check_same(path, checked)
        raise
    try:
        _check_same(path, checked)
    except BaseException:
        opened.close()
        raise
    return opened


def _check_same(path: str, checked: FileId) -> None:
    # Raise NotRegularFileError unless ``path`` names the regular file ``checked``.
    try:
        found = os.stat(path)
    except OSError:
        raise NotRegularFileError(REPLACED) from None
    if not stat.S_ISREG(found.st_mode):
        raise _refuse(found.st_mode)
    if (found.st_dev, found.st_ino) != checked:
        raise NotRegularFileError(REPLACED)


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
