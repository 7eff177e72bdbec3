"""The workspace tools' operations: each runs in a worker thread, walks its path by
directory descriptor (``_paths.walk``) and does its I/O on what it opened."""

from __future__ import annotations

import codecs
import errno
import itertools
import os
import secrets
import stat
from collections.abc import Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from ._grep import compile_pattern, hard_links
from ._grep import grep as _grep
from ._paths import (
    DIR_FLAGS,
    FILE_FLAGS,
    Symlink,
    WorkspaceError,
    lstat_at,
    printable,
    read_fd,
    reason,
    show,
    walk,
)

if TYPE_CHECKING:
    from ._root import Workspace

#: list_dir shows at most this many entries.
MAX_LIST_ENTRIES = 1000
#: list_dir reads at most this many entries of a directory (and shows the first
#: MAX_LIST_ENTRIES of those, sorted).
MAX_LIST_READ = 100_000


def _check_file(info: os.stat_result, path: str, directory: str) -> None:
    """Refuse what ``path``'s ``lstat`` shows unless it is a regular file with one link
    (``directory``: what to say of a directory). A symlink raises :class:`Symlink`:
    the walk looks again."""
    if stat.S_ISLNK(info.st_mode):
        raise Symlink
    if stat.S_ISDIR(info.st_mode):
        raise WorkspaceError(f"{show(path)} {directory}")
    if not stat.S_ISREG(info.st_mode):
        raise WorkspaceError(f"{show(path)} is not a regular file")
    if info.st_nlink > 1:
        raise WorkspaceError(hard_links(path, info.st_nlink))


def read_file(workspace: Workspace, args: Mapping[str, Any]) -> str:
    """The text of a file (UTF-8, undecodable bytes replaced), truncated to
    ``max_read_bytes`` with a note saying so."""
    path: str = args["path"]
    limit = workspace.max_read_bytes

    def final(dir_fd: int, name: str | None, rel: str) -> str:
        if name is None:
            raise WorkspaceError(f"{show(path)} is a directory, not a file")
        info = lstat_at(dir_fd, name)
        if info is None:
            raise WorkspaceError(f"{show(path)} does not exist")
        _check_file(info, path, "is a directory, not a file")
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # swapped for a symlink meanwhile
                raise Symlink from None
            raise WorkspaceError(f"{show(path)} cannot be read: {reason(exc)}") from None
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
                raise Symlink  # replaced meanwhile: look again
            if not stat.S_ISREG(opened.st_mode):
                raise WorkspaceError(f"{show(path)} is not a regular file")
            if opened.st_nlink > 1:
                raise WorkspaceError(hard_links(path, opened.st_nlink))
            data = read_fd(fd, limit + 1)
        except OSError as exc:
            raise WorkspaceError(f"{show(path)} cannot be read: {reason(exc)}") from None
        finally:
            os.close(fd)
        if len(data) <= limit:
            return data.decode("utf-8", errors="replace")
        # final=False leaves out a character cut in half at the limit.
        text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data[:limit])
        return f"{text}\n[truncated: showing the first {limit} bytes of {opened.st_size}]"

    with workspace.opened() as root_fd:
        return walk(workspace.root, root_fd, path, final)


def list_dir(workspace: Workspace, args: Mapping[str, Any]) -> str:
    """The entries of a directory, sorted, one a line; directories end in ``/``, and
    so do symlinks to directories inside the workspace (never to one outside)."""
    path: str = args.get("path", ".")

    def final(dir_fd: int, name: str | None, rel: str) -> list[tuple[str, bool]]:
        try:
            fd = os.open("." if name is None else name, DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            raise WorkspaceError(f"{show(path)} does not exist") from None
        except OSError as exc:
            info = lstat_at(dir_fd, name) if name is not None else None
            if info is not None and stat.S_ISLNK(info.st_mode):
                raise Symlink from None
            if info is not None and not stat.S_ISDIR(info.st_mode):
                raise WorkspaceError(f"{show(path)} is not a directory") from None
            raise WorkspaceError(f"{show(path)} cannot be listed: {reason(exc)}") from None
        prefix = "" if rel == "." else rel + "/"
        try:
            with os.scandir(fd) as it:
                # One more than the cap, to tell that the directory has more.
                return [(prefix + e.name, e.is_dir(follow_symlinks=False))
                        for e in itertools.islice(it, MAX_LIST_READ + 1)]
        except OSError as exc:
            raise WorkspaceError(f"{show(path)} cannot be listed: {reason(exc)}") from None
        finally:
            os.close(fd)

    with workspace.opened() as root_fd:
        entries = sorted(walk(workspace.root, root_fd, path, final))
        shown = [_entry(workspace, root_fd, rel, is_dir) for rel, is_dir in
                 entries[:MAX_LIST_ENTRIES]]
    if not shown:
        return "(empty directory)"
    if len(entries) > MAX_LIST_READ:
        shown.append(f"[... and more: listing stopped after reading {MAX_LIST_READ} entries]")
    elif len(entries) > len(shown):
        shown.append(f"[... and {len(entries) - len(shown)} more entries]")
    return "\n".join(shown)


def _entry(workspace: Workspace, root_fd: int, rel: str, is_dir: bool) -> str:
    name = rel.rpartition("/")[2]
    if is_dir:
        return printable(name) + "/"

    def final(dir_fd: int, last: str | None, _rel: str) -> bool:
        if last is None:
            return True
        info = lstat_at(dir_fd, last)
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise Symlink
        return info is not None and stat.S_ISDIR(info.st_mode)

    try:
        inside_dir = walk(workspace.root, root_fd, rel, final)
    except WorkspaceError:
        inside_dir = False  # a file, or a symlink leading outside, looping or dangling
    return printable(name) + "/" if inside_dir else printable(name)


def grep(workspace: Workspace, args: Mapping[str, Any]) -> str:
    """The lines matching a pattern in a file or under a directory, as
    ``path:line: text``, at most ``max_matches`` of them."""
    matcher = compile_pattern(args["pattern"], regex=workspace.regex)
    with workspace.opened() as root_fd:
        return _grep(
            workspace.root, root_fd, args.get("path", "."), matcher, workspace.max_matches
        )


def write_file(workspace: Workspace, args: Mapping[str, Any]) -> str:
    """Write text to a file (UTF-8), creating it and its parent directories if needed
    and replacing it if it exists: written to a temporary file beside it, then
    renamed over it, so the file holds its old content or its new, never a part."""
    path: str = args["path"]
    content: str = args["content"]
    limit = workspace.max_write_bytes
    data = content.encode("utf-8", errors="replace")
    if len(data) > limit:
        raise WorkspaceError(
            f"The content is too large: {len(data)} bytes (UTF-8); the limit is {limit}"
        )

    def final(dir_fd: int, name: str | None, rel: str) -> str:
        if name is None:
            raise WorkspaceError(f"{show(path)} is a directory; cannot write a file there")
        info = lstat_at(dir_fd, name)
        if info is not None:
            _check_file(info, path, "is a directory; cannot write a file there")
        _replace(dir_fd, name, data, None if info is None else stat.S_IMODE(info.st_mode))
        return f"Wrote {len(data)} bytes to {printable(rel)}"

    try:
        with workspace.opened() as root_fd:
            return walk(workspace.root, root_fd, path, final, create=True)
    except OSError as exc:
        raise WorkspaceError(f"{show(path)} cannot be written: {reason(exc)}") from None


def _replace(dir_fd: int, name: str, data: bytes, mode: int | None) -> None:
    """Write ``data`` to a new temporary file in ``dir_fd`` and rename it to ``name``:
    the rename replaces the directory entry, whatever it is now (a symlink swapped
    in meanwhile is replaced, not followed)."""
    temp = f".tmp-{secrets.token_hex(8)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o666, dir_fd=dir_fd)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
