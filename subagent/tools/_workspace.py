"""Built-in tools confined to a workspace directory: read_file, list_dir, grep, write_file.

Every path a model gives is taken relative to the workspace root, resolved (``..`` and
symlinks followed) and refused unless the result lies inside the root: absolute
paths, ``..`` that climbs out, and symlinks pointing outside are all refused. File
I/O runs in a worker thread, off the trio thread. A check and the I/O that follows
it are not atomic: a process that swaps a directory for a symlink in between can
still redirect a call, so the workspace must not be shared with untrusted writers.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import attrs
import trio

from agentcore import Tool

#: read_file returns at most this many bytes of a file.
MAX_READ_BYTES = 256 * 1024
#: grep stops after this many matching lines.
MAX_GREP_MATCHES = 200
#: grep skips files larger than this.
MAX_GREP_FILE_BYTES = 1024 * 1024
#: grep shortens longer matching lines to this many characters.
MAX_GREP_LINE_CHARS = 300
#: list_dir shows at most this many entries.
MAX_LIST_ENTRIES = 1000


class WorkspaceError(ValueError):
    """A workspace tool refused a call; the message names the path (or argument) and
    what is wrong with it."""


@attrs.frozen
class Workspace:
    """A directory that tools are confined to, and its limits.

    Build it with :meth:`open`, which checks the root and resolves it.
    """

    root: Path
    max_read_bytes: int = MAX_READ_BYTES
    max_matches: int = MAX_GREP_MATCHES

    @classmethod
    def open(
        cls,
        root: str | os.PathLike[str],
        *,
        max_read_bytes: int = MAX_READ_BYTES,
        max_matches: int = MAX_GREP_MATCHES,
    ) -> Workspace:
        """The workspace rooted at ``root`` (resolved now, synchronously).

        Raises:
          WorkspaceError: ``root`` is not an existing directory.
        """
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise WorkspaceError(f"Workspace root {str(root)!r} is not a directory")
        return cls(resolved, max_read_bytes, max_matches)

    def resolve(self, path: str) -> Path:
        """The absolute, symlink-free path that ``path`` (relative to the root) names.
        Does file-system I/O: call it off the trio thread.

        Raises:
          WorkspaceError: ``path`` is empty, absolute, contains a NUL byte, cannot be
            resolved, or resolves outside the workspace.
        """
        if not path:
            raise WorkspaceError("The path is empty; give a path relative to the workspace root")
        if "\0" in path:
            raise WorkspaceError(f"{path!r} contains a NUL byte")
        if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute():
            raise WorkspaceError(
                f"{path!r} is an absolute path; give a path relative to the workspace root"
            )
        try:
            resolved = (self.root / path).resolve()
        except RuntimeError:  # Python 3.11 and 3.12 report a loop so, naming the full path
            raise WorkspaceError(f"{path!r} cannot be resolved: a symlink loops") from None
        except OSError as exc:  # a loop (3.13+), a name too long, ...
            raise WorkspaceError(f"{path!r} cannot be resolved: {_reason(exc)}") from None
        if not resolved.is_relative_to(self.root):
            raise WorkspaceError(f"{path!r} is outside the workspace")
        return resolved

    def relative(self, resolved: Path) -> str:
        """``resolved`` relative to the root, with ``/`` separators (``.`` for the root)."""
        return resolved.relative_to(self.root).as_posix() or "."


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


#: A tool's work, run in a worker thread: the workspace and the checked arguments.
Operation = Callable[[Workspace, Mapping[str, Any]], str]


@attrs.define(eq=False)  # not frozen: agentcore.Tool declares plain (settable) attributes
class WorkspaceTool:
    """An agentcore Tool whose work is a sync :data:`Operation` run off the trio thread.

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
        """Run the tool on ``arguments`` (JSON text). A checkpoint.

        Raises:
          WorkspaceError: bad arguments, or a path or file the tool must refuse.
        """
        args = _check_arguments(self.parameters, arguments)
        return await trio.to_thread.run_sync(self.operation, self.workspace, args)


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
            raise WorkspaceError(f"Unknown argument {name!r} (expected {', '.join(properties)})")
        kind = properties[name]["type"]
        if not isinstance(value, _JSON_TYPES[kind]) or isinstance(value, bool):
            raise WorkspaceError(f"Argument {name!r} must be a {kind}")
    return args


def _stat(workspace: Workspace, path: str) -> tuple[Path, os.stat_result]:
    resolved = workspace.resolve(path)
    try:
        return resolved, resolved.stat()
    except FileNotFoundError:
        raise WorkspaceError(f"{path!r} does not exist") from None
    except OSError as exc:
        raise WorkspaceError(f"{path!r} cannot be read: {_reason(exc)}") from None


def read_file(workspace: Workspace, args: Mapping[str, Any]) -> str:
    """The text of a file (UTF-8, undecodable bytes replaced), truncated to
    ``max_read_bytes`` with a note saying so."""
    path: str = args["path"]
    resolved, info = _stat(workspace, path)
    if stat.S_ISDIR(info.st_mode):
        raise WorkspaceError(f"{path!r} is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise WorkspaceError(f"{path!r} is not a regular file")
    limit = workspace.max_read_bytes
    try:
        with resolved.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise WorkspaceError(f"{path!r} cannot be read: {_reason(exc)}") from None
    if len(data) <= limit:
        return data.decode("utf-8", errors="replace")
    # final=False leaves out a character cut in half at the limit.
    text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data[:limit])
    return f"{text}\n[truncated: showing the first {limit} bytes of {info.st_size}]"


def list_dir(workspace: Workspace, args: Mapping[str, Any]) -> str:
    """The entries of a directory, sorted, one a line, directories ending in ``/``."""
    path: str = args.get("path", ".")
    resolved, info = _stat(workspace, path)
    if not stat.S_ISDIR(info.st_mode):
        raise WorkspaceError(f"{path!r} is not a directory")
    try:
        entries = sorted(
            entry.name + ("/" if _is_dir(entry) else "") for entry in os.scandir(resolved)
        )
    except OSError as exc:
        raise WorkspaceError(f"{path!r} cannot be listed: {_reason(exc)}") from None
    if not entries:
        return "(empty directory)"
    shown = entries[:MAX_LIST_ENTRIES]
    if len(entries) > len(shown):
        shown.append(f"[... and {len(entries) - len(shown)} more entries]")
    return "\n".join(shown)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:  # a symlink loop
        return False


def _files(workspace: Workspace, top: Path) -> Iterator[Path]:
    """The regular files under ``top`` inside the workspace, in sorted order, skipping
    ``.git`` and not following symlinked directories."""
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            path = Path(dirpath, name)
            try:
                target = path.resolve()
            except (OSError, RuntimeError):  # a symlink loop
                continue
            if not target.is_relative_to(workspace.root) or not target.is_file():
                continue
            yield path


def _matches(path: Path, pattern: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    try:
        if path.stat().st_size > MAX_GREP_FILE_BYTES:
            return
        data = path.read_bytes()
    except OSError:
        return
    if b"\0" in data[:8192]:
        return  # binary
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if pattern.search(line):
            if len(line) > MAX_GREP_LINE_CHARS:
                line = line[:MAX_GREP_LINE_CHARS] + "..."
            yield number, line


def grep(workspace: Workspace, args: Mapping[str, Any]) -> str:
    """The lines matching a regular expression in a file or under a directory, as
    ``path:line: text``, at most ``max_matches`` of them."""
    path: str = args.get("path", ".")
    try:
        pattern = re.compile(args["pattern"])
    except re.error as exc:
        raise WorkspaceError(f"Invalid pattern {args['pattern']!r}: {exc}") from None
    resolved, info = _stat(workspace, path)
    files = [resolved] if stat.S_ISREG(info.st_mode) else _files(workspace, resolved)
    found: list[str] = []
    for file in files:
        for number, line in _matches(file, pattern):
            if len(found) == workspace.max_matches:
                found.append(f"[stopped after {workspace.max_matches} matches]")
                return "\n".join(found)
            found.append(f"{workspace.relative(file)}:{number}: {line}")
    return "\n".join(found) if found else "no matches"


def write_file(workspace: Workspace, args: Mapping[str, Any]) -> str:
    """Write text to a file (UTF-8), creating it and its parent directories if needed
    and replacing it if it exists."""
    path: str = args["path"]
    content: str = args["content"]
    resolved = workspace.resolve(path)
    if resolved.is_dir():
        raise WorkspaceError(f"{path!r} is a directory; cannot write a file there")
    data = content.encode("utf-8", errors="replace")
    try:
        resolved.parent.mkdir(parents=True, exist_ok=True)
        resolved.write_bytes(data)
    except OSError as exc:
        raise WorkspaceError(f"{path!r} cannot be written: {_reason(exc)}") from None
    return f"Wrote {len(data)} bytes to {workspace.relative(resolved)}"


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
) -> tuple[Tool, ...]:
    """The workspace tools confined to ``root``: ``read_file``, ``list_dir`` and
    ``grep`` (read-only) and ``write_file`` (mutating), in that order.

    Not a checkpoint; checks ``root`` synchronously.

    Raises:
      WorkspaceError: ``root`` is not an existing directory.
    """
    ws = Workspace.open(root, max_read_bytes=max_read_bytes, max_matches=max_matches)
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
            "Search the files of the workspace for lines matching a Python regular "
            f"expression; prints 'path:line: text', at most {max_matches} matches.",
            _schema(
                {
                    "pattern": {"type": "string", "description": "A Python regular expression."},
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
            "replacing the file if it exists.",
            _schema({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
            False,
            ws,
            write_file,
        ),
    )
