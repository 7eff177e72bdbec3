"""The workspace: the directory the tools are confined to, and its limits.

A value (frozen); the path walk it relies on is in ``_paths``, the work on files in
``_files`` and ``_grep``, and the tools that run that work in ``_workspace``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from ._grep import HAVE_RE2
from ._paths import Symlink, WorkspaceError, lstat_at, reason, walk

#: read_file returns at most this many bytes of a file.
MAX_READ_BYTES = 256 * 1024
#: write_file refuses content longer than this many bytes (UTF-8).
MAX_WRITE_BYTES = 1024 * 1024
#: grep stops after this many matching lines.
MAX_GREP_MATCHES = 200

@attrs.frozen
class Workspace:
    """A directory that tools are confined to, and its limits.

    Build it with :meth:`open`, which checks the root and resolves it. ``regex``
    says whether grep patterns are RE2 regular expressions (True) or fixed strings.
    """

    root: Path
    max_read_bytes: int = MAX_READ_BYTES
    max_matches: int = MAX_GREP_MATCHES
    max_write_bytes: int = MAX_WRITE_BYTES
    regex: bool = HAVE_RE2

    @classmethod
    def open(
        cls,
        root: str | os.PathLike[str],
        *,
        max_read_bytes: int = MAX_READ_BYTES,
        max_matches: int = MAX_GREP_MATCHES,
        max_write_bytes: int = MAX_WRITE_BYTES,
        regex: bool | None = None,
    ) -> Workspace:
        """The workspace rooted at ``root`` (resolved now, synchronously).

        Args:
          regex: Whether grep takes RE2 regular expressions; None (the default): if
            ``google-re2`` is installed (the ``tools`` extra), else fixed strings.

        Raises:
          WorkspaceError: ``root`` is not an existing directory, or ``regex`` is
            True without ``google-re2``.
        """
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise WorkspaceError(f"Workspace root {str(root)!r} is not a directory")
        if regex and not HAVE_RE2:
            raise WorkspaceError(
                "grep with regular expressions needs google-re2: "
                "pip install 'subagent[tools]'"
            )
        return cls(
            resolved, max_read_bytes, max_matches, max_write_bytes,
            HAVE_RE2 if regex is None else regex,
        )

    @contextmanager
    def opened(self) -> Iterator[int]:
        """A descriptor of the root directory, closed on exit. Does I/O: call it off
        the trio thread."""
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise WorkspaceError(f"The workspace root cannot be opened: {reason(exc)}") from None
        try:
            yield fd
        finally:
            os.close(fd)

    def resolve(self, path: str) -> Path:
        """The absolute, symlink-free path that ``path`` (relative to the root) names,
        walked as the tools walk it; missing components are taken lexically. Does
        I/O: call it off the trio thread. The tools do not use it: a path checked
        now may be swapped later, so they open what they check.

        Raises:
          WorkspaceError: ``path`` is malformed, loops, or leads outside the workspace.
        """

        def final(dir_fd: int, name: str | None, rel: str) -> Path:
            if name is not None and dir_fd != -1:
                info = lstat_at(dir_fd, name)
                if info is not None and stat.S_ISLNK(info.st_mode):
                    raise Symlink
            return self.root if rel == "." else self.root / rel

        with self.opened() as fd:
            return walk(self.root, fd, path, final, lexical=True)
