"""A small disk that fills up for real: a tmpfs of a few hundred KiB mounted on a
folder of the test's own, and a file that takes all of its free space, so that the
next write of a store gets ``ENOSPC`` from the kernel (no mock of ``write``).

Mounting needs ``CAP_SYS_ADMIN`` (root, as in the CI container); where the test process
lacks it the cell is skipped, saying why. A user and mount namespace (``unshare -rm``)
would not do: the pool and its stores run in the test process, which cannot enter a
mount namespace once it has threads, and a path into another process's namespace
(``/proc/PID/root/...``) does not survive ``realpath`` (the SQLite lock file) nor
SQLite's own resolution of symbolic links.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)

FILLER = "filler"
"""The name of the file :func:`fill` writes on the disk."""


@contextlib.contextmanager
def small_disk(folder: Path, size: int) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` bytes on ``folder`` (made here) for the block; it is
    unmounted after it (lazily: whatever is still open of it goes with the last close).
    Skips the test if the process may not mount."""
    folder.mkdir()
    target = os.fsencode(folder)
    options = f"size={size},mode=0700".encode()
    if _libc.mount(b"tmpfs", target, b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                   options) != 0:
        code = ctypes.get_errno()
        pytest.skip(f"cannot mount a small tmpfs ({os.strerror(code)}): a real full disk "
                    "needs CAP_SYS_ADMIN")
    try:
        yield folder
    finally:
        if _libc.umount2(target, _MNT_DETACH) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), str(folder))


def fill(disk: Path) -> None:
    """Write :data:`FILLER` on ``disk`` until the kernel says ``ENOSPC``: no block is
    left (a store's last block may still have room for a few bytes)."""
    fd = os.open(disk / FILLER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    block = bytes(4096)
    try:
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    finally:
        os.close(fd)
    assert os.statvfs(disk).f_bavail == 0


def free(disk: Path) -> None:
    """Remove :data:`FILLER`: the disk has room again."""
    os.unlink(disk / FILLER)
