"""Built-in tools confined to a workspace directory: read_file, list_dir, grep, write_file.

Every path a model gives is taken relative to the workspace root and walked one
component at a time by directory descriptor with ``O_NOFOLLOW`` (see ``_paths``):
absolute paths, ``..`` that climbs out, and symlinks leading outside are refused,
and a concurrent swap of a directory for a symlink cannot redirect a read or a
write. Regular files with more than one hard link are refused (another link may be
outside). ``write_file`` writes a temporary file in the target's directory and
renames it over the target. Every error is a :class:`WorkspaceError` naming the
path relative to the workspace, never the host's absolute path.

The tools' file I/O runs in worker threads that are *abandoned* when the call is
cancelled (``tool_timeout``, a task's ``timeout`` or ``idle_timeout``, a cancel):
the call ends on time with an error result while the thread finishes in the
background. What an abandoned thread may still do: a ``grep`` stops at its next
file or symlink, or within 256 lines (after the line it is matching: seconds at worst, for
the most complex pattern allowed over a 1 MiB line); a ``read_file`` or ``list_dir`` finishes its
(bounded) read and its result is dropped; a ``write_file`` may still land (the
rename is atomic: the file holds either its old or its new content). The threads
draw on their own limiter (:data:`MAX_WORKSPACE_THREADS` per trio run), so threads
still running after their calls were abandoned never hold up other thread work of
the process (an audit sink's, say).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from agentcore import Tool

from ._files import grep, list_dir, read_file, write_file
from ._grep import HAVE_RE2, MAX_PATTERN_CHARS
from ._paths import Symlink, WorkspaceError, lstat_at, reason, show, walk

#: read_file returns at most this many bytes of a file.
MAX_READ_BYTES = 256 * 1024
#: write_file refuses content longer than this many bytes (UTF-8).
MAX_WRITE_BYTES = 1024 * 1024
#: grep stops after this many matching lines.
MAX_GREP_MATCHES = 200
#: At most this many workspace tool calls run their thread at once (per trio run);
#: more wait for one to finish, within their own time limits.
MAX_WORKSPACE_THREADS = 8

_LIMITER: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("workspace_threads")


def _limiter() -> trio.CapacityLimiter:
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = trio.CapacityLimiter(MAX_WORKSPACE_THREADS)
        _LIMITER.set(limiter)
        return limiter


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


#: A tool's work, run in a worker thread: the workspace and the checked arguments.
Operation = Callable[[Workspace, Mapping[str, Any]], str]


@attrs.define(eq=False)  # not frozen: agentcore.Tool declares plain (settable) attributes
class WorkspaceTool:
    """An agentcore Tool whose work is a sync :data:`Operation` run off the trio thread,
    in a thread abandoned when the call is cancelled (see the module docstring for
    what an abandoned thread may still do).

    ``execute`` parses and checks the JSON arguments against ``parameters`` (required
    names, types, no unknown names) and raises :class:`WorkspaceError` for bad ones.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    read_only: bool
    workspace: Workspace
    operation: Operation = attrs.field(repr=False)

    async def execute(self, arguments: str) -> str:
        """Run the tool on ``arguments`` (JSON text). A checkpoint; cancelling it
        returns at once and abandons the thread.

        Raises:
          WorkspaceError: bad arguments, or a path or file the tool must refuse.
        """
        args = _check_arguments(self.parameters, arguments)
        return await trio.to_thread.run_sync(
            _guarded, self.operation, self.workspace, args,
            abandon_on_cancel=True, limiter=_limiter(),
        )


def _guarded(operation: Operation, workspace: Workspace, args: Mapping[str, Any]) -> str:
    try:
        return operation(workspace, args)
    except OSError as exc:  # a last net: the operations wrap their own, by path
        raise WorkspaceError(f"The call failed: {reason(exc)}") from None
    except UnicodeError:  # a last net too: paths and patterns are checked first
        raise WorkspaceError("The call failed: a name is not valid Unicode") from None


_JSON_TYPES: dict[str, type | tuple[type, ...]] = {"string": str, "integer": int}


def _check_arguments(parameters: Mapping[str, Any], arguments: str) -> dict[str, Any]:
    try:
        args = json.loads(arguments)
    except (ValueError, RecursionError) as exc:
        raise WorkspaceError(f"The arguments are not valid JSON: {exc}") from None
    if not isinstance(args, dict):
        raise WorkspaceError("The arguments must be a JSON object")
    properties: Mapping[str, Any] = parameters["properties"]
    for name in parameters.get("required", ()):
        if name not in args:
            raise WorkspaceError(f"Missing argument {name!r}")
    for name, value in args.items():
        if name not in properties:
            raise WorkspaceError(
                f"Unknown argument {show(name)} (expected {', '.join(properties)})"
            )
        kind = properties[name]["type"]
        if not isinstance(value, _JSON_TYPES[kind]) or isinstance(value, bool):
            raise WorkspaceError(f"Argument {name!r} must be a {kind}")
    return args


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_PATH = {"type": "string", "description": "A path relative to the workspace root."}


def workspace_tools(
    root: str | os.PathLike[str],
    *,
    max_read_bytes: int = MAX_READ_BYTES,
    max_matches: int = MAX_GREP_MATCHES,
    max_write_bytes: int = MAX_WRITE_BYTES,
    regex: bool | None = None,
) -> tuple[Tool, ...]:
    """The workspace tools confined to ``root``: ``read_file``, ``list_dir`` and
    ``grep`` (read-only) and ``write_file`` (mutating), in that order.

    Not a checkpoint; checks ``root`` synchronously.

    Args:
      regex: Whether grep takes RE2 regular expressions (needs ``google-re2``, the
        ``tools`` extra) or fixed strings; None (the default): RE2 if installed.

    Raises:
      WorkspaceError: ``root`` is not an existing directory, or ``regex`` is True
        without ``google-re2``.
    """
    ws = Workspace.open(
        root, max_read_bytes=max_read_bytes, max_matches=max_matches,
        max_write_bytes=max_write_bytes, regex=regex,
    )
    if ws.regex:
        grep_text = (
            "Search the files of the workspace for lines matching an RE2 regular "
            "expression (no backreferences or lookaround)"
        )
        pattern = f"An RE2 regular expression (at most {MAX_PATTERN_CHARS} characters)."
    else:
        grep_text = (
            "Search the files of the workspace for lines containing a fixed string "
            "(not a regular expression: every character matches itself)"
        )
        pattern = f"A fixed string (at most {MAX_PATTERN_CHARS} characters)."
    return (
        WorkspaceTool(
            "read_file",
            f"Read a text file of the workspace (at most {max_read_bytes} bytes; "
            "longer files are truncated, with a note).",
            _schema({"path": _PATH}, ["path"]),
            True,
            ws,
            read_file,
        ),
        WorkspaceTool(
            "list_dir",
            "List a directory of the workspace, one entry a line; directories end in '/'.",
            _schema({"path": {**_PATH, "default": "."}}, []),
            True,
            ws,
            list_dir,
        ),
        WorkspaceTool(
            "grep",
            f"{grep_text}; prints 'path:line: text', at most {max_matches} matches.",
            _schema(
                {
                    "pattern": {"type": "string", "description": pattern},
                    "path": {
                        **_PATH,
                        "description": "A file or directory to search (default: all).",
                    },
                },
                ["pattern"],
            ),
            True,
            ws,
            grep,
        ),
        WorkspaceTool(
            "write_file",
            "Write a text file of the workspace, creating parent directories and "
            f"replacing the file if it exists (at most {max_write_bytes} bytes).",
            _schema({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
            False,
            ws,
            write_file,
        ),
    )
