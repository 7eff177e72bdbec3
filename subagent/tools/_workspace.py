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
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio

from agentcore import Tool

from ._files import grep, list_dir, read_file, write_file
from ._grep import MAX_PATTERN_CHARS
from ._paths import WorkspaceError, reason, show
from ._root import MAX_GREP_MATCHES as MAX_GREP_MATCHES
from ._root import MAX_READ_BYTES as MAX_READ_BYTES
from ._root import MAX_WRITE_BYTES as MAX_WRITE_BYTES
from ._root import Workspace

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
