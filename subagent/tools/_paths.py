"""Paths confined to a workspace, walked one component at a time by directory descriptor;
reading by descriptor.

A model names a path; :func:`walk` opens each directory on the way relative to the
descriptor of the one before (``os.open(name, O_DIRECTORY | O_NOFOLLOW, dir_fd=...)``,
openat-style) and resolves a symlink it meets itself (``readlink`` relative to the
same descriptor), against its own stack of open directories. The kernel never
follows a link for us, so swapping a directory for a symlink to outside between two
steps cannot redirect the walk: a link is always resolved inside the root, or
refused. Every error is a :class:`WorkspaceError` naming the path as the model gave
it (shortened), never the host's absolute path.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from collections.abc import Callable
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TypeVar

T = TypeVar("T")

#: A path longer than this many characters is refused.
MAX_PATH_CHARS = 4096
#: A path of more than this many components (``a/b`` has two) is refused.
MAX_PATH_COMPONENTS = 256
#: Resolving a path follows at most this many symlinks (as Linux does).
MAX_SYMLINKS = 40
#: Resolving a path takes at most this many steps (components, symlink targets included).
MAX_STEPS = 4 * MAX_PATH_COMPONENTS
#: Error texts quote at most this many characters of a path.
SHOWN_PATH_CHARS = 120

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: O_NONBLOCK: opening a FIFO or a device that appeared since the check cannot block.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class WorkspaceError(ValueError):
    """A workspace tool refused a call; the message names the path (or argument) and
    what is wrong with it, relative to the workspace."""


class Symlink(Exception):
    """Raised by a :data:`Final` step: the name it was given is a symlink (to resolve)."""


#: The last step of a walk: the open directory, the last name in it (None: the
#: directory itself) and the path relative to the root. Raises :class:`Symlink`
#: when the name turns out to be a symlink; the walk resolves it and steps again.
Final = Callable[[int, "str | None", str], T]


def show(path: str) -> str:
    """``path`` quoted for an error text, shortened if long."""
    if len(path) > SHOWN_PATH_CHARS:
        return repr(path[:SHOWN_PATH_CHARS]) + f"... ({len(path)} characters)"
    return repr(path)


def printable(name: str) -> str:
    """``name`` as valid Unicode: a file name that is not UTF-8 comes from the OS with
    surrogate escapes, which no UTF-8 encoder (JSON, a ledger) accepts."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def reason(exc: OSError) -> str:
    """A short text for ``exc`` from its errno alone: ``str(exc)`` holds host paths."""
    if exc.errno is None:
        return "an operating-system error"
    if exc.errno == errno.ELOOP:
        return "a symlink loops"
    return os.strerror(exc.errno)


def components(path: str) -> list[str]:
    """The components of ``path``, checked.

    Raises:
      WorkspaceError: ``path`` is empty, absolute, too long, has too many components,
        contains a NUL byte or is not valid Unicode (a lone surrogate).
    """
    if not path:
        raise WorkspaceError("The path is empty; give a path relative to the workspace root")
    if len(path) > MAX_PATH_CHARS:
        raise WorkspaceError(
            f"{show(path)} is too long: {len(path)} characters; the limit is {MAX_PATH_CHARS}"
        )
    if "\0" in path:
        raise WorkspaceError(f"{show(path)} contains a NUL byte")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise WorkspaceError(f"{show(path)} is not valid Unicode (a lone surrogate)") from None
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute():
        raise WorkspaceError(
            f"{show(path)} is an absolute path; give a path relative to the workspace root"
        )
    parts = path.split("/")
    if len(parts) > MAX_PATH_COMPONENTS:
        raise WorkspaceError(
            f"{show(path)} has {len(parts)} components; the limit is {MAX_PATH_COMPONENTS}"
        )
    return parts


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    """The status of ``name`` in ``dir_fd`` without following a symlink; None if missing."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def read_fd(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``fd`` (fewer only at its end)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, min(limit - size, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def walk(
    root: Path,
    root_fd: int,
    path: str,
    final: Final[T],
    *,
    create: bool = False,
    lexical: bool = False,
) -> T:
    """Walk ``path`` from ``root_fd`` and return what ``final`` returns for its end.

    Directories on the way are opened with ``O_NOFOLLOW``; symlinks are resolved here,
    inside ``root`` (an absolute target under ``root`` is taken relative to it).
    ``final`` runs while every directory of the walk is open; its descriptor is
    closed after it returns.

    Args:
      create: Missing directories on the way are created (write_file).
      lexical: A missing or non-directory component is not an error: the rest of the
        path is taken lexically, and ``final`` gets ``-1`` as the directory (resolve).

    Raises:
      WorkspaceError: the path is malformed, leads outside the root, loops, or a
        directory on the way is missing or cannot be opened.
    """
    pending = deque(components(path))
    fds = [root_fd]
    names: list[str] = []
    links = steps = 0

    def fail(what: str) -> WorkspaceError:
        return WorkspaceError(f"{show(path)} {what}")

    def follow(dir_fd: int, name: str) -> None:
        nonlocal links
        links += 1
        if links > MAX_SYMLINKS:
            raise fail("cannot be resolved: a symlink loops")
        try:
            target = os.readlink(name, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOENT):
                pending.appendleft(name)  # no longer a symlink: look again
                return
            raise fail(f"cannot be resolved: {reason(exc)}") from None
        if target.startswith("/"):
            if not Path(target).is_relative_to(root):
                raise fail("is outside the workspace")
            while len(fds) > 1:
                os.close(fds.pop())
            names.clear()
            target = Path(target).relative_to(root).as_posix()
        pending.extendleft(reversed(target.split("/")))

    try:
        while True:
            steps += 1
            if steps > MAX_STEPS:
                raise fail(f"cannot be resolved: more than {MAX_STEPS} steps")
            real = len(names) == len(fds) - 1
            top = fds[-1] if real else -1
            if not pending:
                try:
                    return final(top, None, "/".join(names) or ".")
                except Symlink:  # pragma: no cover - a final step only raises it for a name
                    raise fail("cannot be resolved") from None
            part = pending.popleft()
            if part in ("", "."):
                continue
            if part == "..":
                if not names:
                    raise fail("is outside the workspace")
                if real:
                    os.close(fds.pop())
                names.pop()
                continue
            if not pending:
                try:
                    return final(top, part, "/".join([*names, part]))
                except Symlink:
                    follow(top, part)
                    continue
            if not real:
                names.append(part)
                continue
            try:
                fd = os.open(part, DIR_FLAGS, dir_fd=top)
            except FileNotFoundError:
                if create:
                    try:
                        os.mkdir(part, 0o777, dir_fd=top)
                    except FileExistsError:
                        pass  # made by someone else meanwhile: open it
                    except OSError as exc:
                        raise fail(f"cannot be written: {reason(exc)}") from None
                    pending.appendleft(part)
                elif lexical:
                    names.append(part)
                else:
                    raise fail("does not exist") from None
                continue
            except OSError as exc:
                info = lstat_at(top, part) if exc.errno in (errno.ENOTDIR, errno.ELOOP) else None
                if info is not None and stat.S_ISLNK(info.st_mode):
                    follow(top, part)
                elif lexical and exc.errno == errno.ENOTDIR:
                    names.append(part)
                elif exc.errno == errno.ENOTDIR:
                    where = show("/".join([*names, part]))
                    raise fail(f"cannot be resolved: {where} is not a directory") from None
                else:
                    raise fail(f"cannot be resolved: {reason(exc)}") from None
                continue
            fds.append(fd)
            names.append(part)
    except OSError as exc:
        raise fail(f"cannot be resolved: {reason(exc)}") from None
    finally:
        for fd in fds[1:]:
            os.close(fd)
