"""grep: patterns matched in linear time, over a tree walked by directory descriptor.

With ``google-re2`` installed (the ``tools`` extra) a pattern is an RE2 regular
expression: matching takes time linear in the text, whatever the pattern (no
backreferences or lookaround, so no catastrophic backtracking), and RE2 releases the
GIL while it matches. Without it the pattern is a fixed string (a substring test),
and the tool's description says so. Python's ``re`` never sees a model's pattern.

Every search is bounded: the pattern's length, each file's size, the bytes and the
directory entries one call reads, and the depth it descends. The search polls
``trio.from_thread.check_cancelled`` between files and every few lines, so a call
abandoned by its timeout stops soon after instead of running to the end.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

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

#: A pattern longer than this many characters is refused.
MAX_PATTERN_CHARS = 1000
#: grep skips files larger than this.
MAX_GREP_FILE_BYTES = 1024 * 1024
#: One grep call reads at most this many bytes in all, then stops with a note.
MAX_GREP_TOTAL_BYTES = 32 * 1024 * 1024
#: One grep call looks at most at this many directory entries, then stops with a note.
MAX_GREP_ENTRIES = 100_000
#: grep does not descend more than this many directories below its start.
MAX_GREP_DEPTH = 64
#: grep shortens longer matching lines to this many characters.
MAX_GREP_LINE_CHARS = 300
#: The memory RE2 may use for one compiled pattern (its program and its DFA cache);
#: a pattern whose program does not fit is refused as too large.
RE2_MAX_MEM = 8 * 1024 * 1024
#: A pattern that RE2 compiles to more instructions than this is refused. RE2 is
#: linear in the text, but with a factor that grows with the program when its DFA
#: cache overflows: measured here, about 1 s per 200 KB line near this size, 4 s per
#: 200 KB at 2,000 instructions, 5 s at 3,000 instructions.
MAX_PATTERN_PROGRAM = 1000
#: Lines searched between two cancellation polls.
_POLL_LINES = 256

try:
    _re2: Any = importlib.import_module("re2")  # google-re2 (untyped, optional)
except ImportError:
    _re2 = None

#: Whether grep can take regular expressions here (``google-re2`` is installed).
HAVE_RE2 = _re2 is not None

#: Whether a line (bytes, without its end) matches.
Matcher = Callable[[bytes], bool]


def compile_pattern(pattern: str, *, regex: bool) -> Matcher:
    """The matcher for ``pattern``: an RE2 regular expression, or a fixed string.

    Raises:
      WorkspaceError: the pattern is too long, not valid Unicode, or (regex) RE2
        cannot compile it; the message names the problem.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise WorkspaceError(
            f"The pattern is too long: {len(pattern)} characters; "
            f"the limit is {MAX_PATTERN_CHARS}"
        )
    try:
        encoded = pattern.encode("utf-8")
    except UnicodeEncodeError:
        raise WorkspaceError("The pattern is not valid Unicode (a lone surrogate)") from None
    if not regex:
        return lambda line: encoded in line
    options = _re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern to stderr
    options.never_capture = True  # groups are not reported, and the DFA handles every match
    options.max_mem = RE2_MAX_MEM
    try:
        compiled = _re2.compile(pattern, options)
    except _re2.error as exc:
        problem = exc.args[0] if exc.args else "cannot compile"
        if isinstance(problem, bytes):
            problem = problem.decode("utf-8", "replace")
        problem = str(problem)
        if len(problem) > 200:
            problem = problem[:200] + "..."
        raise WorkspaceError(f"Invalid pattern {show(pattern)}: {problem}") from None
    finally:
        # google-re2 keeps the last 128 compiled patterns (up to RE2_MAX_MEM each);
        # hostile patterns must not pin that much memory.
        _re2.purge()
    # ProgramSize is on google-re2's underlying RE2 object (no public accessor).
    size = getattr(compiled, "_regexp", None)
    program = size.ProgramSize() if size is not None else 0
    if program > MAX_PATTERN_PROGRAM:
        raise WorkspaceError(
            f"Invalid pattern {show(pattern)}: too complex ({program} RE2 instructions; "
            f"the limit is {MAX_PATTERN_PROGRAM}); search for a simpler pattern"
        )
    search = compiled.search
    return lambda line: search(line) is not None


class _Search:
    """One grep call's progress: its matches, its budgets, and why it stopped."""

    def __init__(self, root: Path, root_fd: int, matcher: Matcher, max_matches: int) -> None:
        self.root = root
        self.root_fd = root_fd
        self.matcher = matcher
        self.max_matches = max_matches
        self.found: list[str] = []
        self.read = 0
        self.entries = 0
        self.stopped: str | None = None

    def text(self) -> str:
        lines = self.found or ["no matches"]
        if self.stopped is not None:
            lines = [*lines, self.stopped]
        return "\n".join(lines)

    def file(self, dir_fd: int, name: str, rel: str) -> None:
        """Search one file by name in ``dir_fd``: skipped unless it is a regular file
        with one link, small enough, and not binary."""
        trio.from_thread.check_cancelled()
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        except OSError:
            return  # vanished, a symlink meanwhile, unreadable: not searched
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                return
            if info.st_size > MAX_GREP_FILE_BYTES:
                return
            if self.read + info.st_size > MAX_GREP_TOTAL_BYTES:
                self.stopped = f"[stopped after searching {self.read} bytes]"
                return
            data = read_fd(fd, MAX_GREP_FILE_BYTES + 1)
        except OSError:
            return
        finally:
            os.close(fd)
        if len(data) > MAX_GREP_FILE_BYTES:
            return  # grew since fstat
        self.read += len(data)
        if b"\0" in data[:8192]:
            return  # binary
        for number, line in enumerate(data.splitlines(), 1):
            if number % _POLL_LINES == 0:
                trio.from_thread.check_cancelled()
            if self.matcher(line):
                if len(self.found) == self.max_matches:
                    self.stopped = f"[stopped after {self.max_matches} matches]"
                    return
                text = line.decode("utf-8", "replace")
                if len(text) > MAX_GREP_LINE_CHARS:
                    text = text[:MAX_GREP_LINE_CHARS] + "..."
                self.found.append(f"{printable(rel)}:{number}: {text}")

    def linked_file(self, rel: str) -> None:
        """Search the file a symlink at ``rel`` names, if it is a regular file inside
        (listed under the link's name); anything else is skipped."""
        # Polled here too: resolving a link may take up to MAX_STEPS directory opens
        # and reach no file, and a tree can hold MAX_GREP_ENTRIES such links.
        trio.from_thread.check_cancelled()

        def final(dir_fd: int, name: str | None, _rel: str) -> None:
            if name is None:
                return
            info = lstat_at(dir_fd, name)
            if info is not None and stat.S_ISLNK(info.st_mode):
                raise Symlink
            if info is not None and stat.S_ISREG(info.st_mode):
                self.file(dir_fd, name, rel)

        # Outside, looping or dangling: not searched.
        with contextlib.suppress(WorkspaceError):
            walk(self.root, self.root_fd, rel, final)

    def directory(self, fd: int, prefix: str) -> list[str]:
        """Search the files of the open directory ``fd``; return its subdirectories'
        names (sorted, without ``.git``)."""
        files: list[tuple[str, bool]] = []
        subdirs: list[str] = []
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    self.entries += 1
                    if self.entries > MAX_GREP_ENTRIES:
                        self.stopped = f"[stopped after {MAX_GREP_ENTRIES} directory entries]"
                        break
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != ".git":
                            subdirs.append(entry.name)
                    elif entry.is_symlink():
                        files.append((entry.name, True))
                    elif entry.is_file(follow_symlinks=False):
                        files.append((entry.name, False))
        except OSError:
            return []
        for name, is_link in sorted(files):
            if self.stopped is not None:
                break
            if is_link:
                self.linked_file(prefix + name)
            else:
                self.file(fd, name, prefix + name)
        return sorted(subdirs)

    def tree(self, top: int, prefix: str) -> None:
        """Search the tree under the open directory ``top`` (closed here), files of a
        directory before its subdirectories, in sorted order, never following a
        symlinked directory."""
        stack = [(top, prefix, self.directory(top, prefix))]
        try:
            while stack and self.stopped is None:
                fd, prefix, subdirs = stack[-1]
                if not subdirs or len(stack) > MAX_GREP_DEPTH:
                    os.close(stack.pop()[0])
                    continue
                name = subdirs.pop(0)
                try:
                    child = os.open(name, DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # vanished or swapped for a symlink: not followed
                # On the stack before it is read, so that it is closed if reading raises.
                stack.append((child, f"{prefix}{name}/", []))
                stack[-1] = (child, f"{prefix}{name}/", self.directory(child, f"{prefix}{name}/"))
        finally:
            for fd, _, _ in stack:
                os.close(fd)


def grep(root: Path, root_fd: int, path: str, matcher: Matcher, max_matches: int) -> str:
    """The lines under ``path`` (a file or a directory) that ``matcher`` accepts, as
    ``path:line: text``, at most ``max_matches`` of them, with a note if it stopped.

    Raises:
      WorkspaceError: ``path`` cannot be walked, does not exist, or is neither a
        regular file nor a directory.
    """
    search = _Search(root, root_fd, matcher, max_matches)

    def final(dir_fd: int, name: str | None, rel: str) -> None:
        if name is None:
            fd = os.open(".", DIR_FLAGS, dir_fd=dir_fd)
        else:
            info = lstat_at(dir_fd, name)
            if info is None:
                raise WorkspaceError(f"{show(path)} does not exist")
            if stat.S_ISLNK(info.st_mode):
                raise Symlink
            if stat.S_ISREG(info.st_mode):
                if info.st_nlink > 1:
                    raise WorkspaceError(hard_links(path, info.st_nlink))
                search.file(dir_fd, name, rel)
                return
            if not stat.S_ISDIR(info.st_mode):
                raise WorkspaceError(f"{show(path)} is not a regular file or a directory")
            try:
                fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Symlink from None  # swapped meanwhile: look again
                raise WorkspaceError(f"{show(path)} cannot be searched: {reason(exc)}") from None
        search.tree(fd, "" if rel == "." else rel + "/")

    walk(root, root_fd, path, final)
    return search.text()


def hard_links(path: str, count: int) -> str:
    """The refusal of a regular file with more than one hard link."""
    return (
        f"{show(path)} has {count} hard links; files with more than one are refused "
        "(another link may be outside the workspace)"
    )
