"""What an MCP server is, as the pool is told (``open_pool(mcp=...)``, ``[mcp.NAME]``).

Pure data and its checks: nothing here imports the ``mcp`` SDK or does I/O.
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from .._errors import SpecError, SubagentError
from ._mask import mask

#: Names of servers (and of the tools a model may call): what model APIs accept.
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: How long, by default, a server may take to start (spawn, initialize, list its tools).
START_TIMEOUT = 30.0
#: The keys of a ``[mcp.NAME]`` table.
TABLE_KEYS = ("command", "args", "env", "url", "headers", "read_only", "start_timeout")


class McpServerError(SubagentError):
    """An MCP server cannot be used now: it did not start, crashed, stopped answering or
    refused a call. Its tools' calls fail with it (an error result the model sees); the
    message names the server."""


class McpToolError(SubagentError):
    """An MCP server answered a call with an error result (``isError``)."""


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _frozen_strings(value: Mapping[str, str]) -> Mapping[str, str]:
    return types.MappingProxyType(dict(value))


def _hidden(table: Mapping[str, str]) -> str:
    # An env or headers table in a repr: its keys, never its values (credentials).
    return repr({key: "***" for key in table})


@attrs.frozen
class McpServer:
    """One MCP server the pool connects to: a command run over stdio, or a URL
    (streamable HTTP).

    Attributes:
      name: What specs call it (``"mcp:NAME"``); letters, digits, ``_`` and ``-``.
      command: The program to run (stdio); exactly one of ``command`` and ``url``.
      args: Its arguments.
      env: Variables added to the few the SDK passes on (``HOME``, ``PATH``, ...): the
        server does not inherit the rest of the caller's environment.
      url: An ``http://`` or ``https://`` endpoint (streamable HTTP).
      headers: Sent with every HTTP request (e.g. an authorization header).
        The repr shows the keys of ``env`` and ``headers``, never their values.
      read_only: The server's tools that the gate may treat as read-only. Only these:
        the server's own hints are untrusted and ignored.
      start_timeout: Seconds the server may take to start (spawn or connect,
        initialize, list its tools). The pool waits at most this long for it when it
        opens; a server not started by then is started again in the background.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    env: Mapping[str, str] = attrs.field(
        factory=dict, converter=_frozen_strings, repr=_hidden
    )
    url: str | None = None
    headers: Mapping[str, str] = attrs.field(
        factory=dict, converter=_frozen_strings, repr=_hidden
    )
    read_only: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    start_timeout: float = START_TIMEOUT

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME.fullmatch(self.name):
            raise SpecError(
                f"MCP server name {self.name!r} must be 1 to 64 letters, digits, '_' or '-'"
            )
        where = f"MCP server {self.name!r}"
        if (self.command is None) == (self.url is None):
            raise SpecError(f"{where}: give exactly one of command (stdio) and url (HTTP)")
        if self.url is not None and not re.match(r"https?://", self.url):
            raise SpecError(f"{where}: url must start with http:// or https://")
        if self.command is not None and not self.command:
            raise SpecError(f"{where}: command is empty")
        for label, values in (("args", self.args), ("read_only", self.read_only)):
            if not all(isinstance(v, str) for v in values):
                raise SpecError(f"{where}: {label} must be strings")
        for label, table in (("env", self.env), ("headers", self.headers)):
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
                raise SpecError(f"{where}: {label} must map strings to strings")
        if not (0 < self.start_timeout < math.inf):
            raise SpecError(f"{where}: start_timeout must be a positive number of seconds")

    def masked(self, text: str) -> str:
        """``text`` (a server's, for a message) with every configured ``env`` and
        header value, and the credential of an ``Authorization`` value (``Bearer
        TOKEN``), written ``***``: a server may echo them back (a stdio server's
        credentials are its ``env``, as an HTTP server's are its headers). Values
        shorter than 8 characters are left alone (replacing them would garble text).
        Encoded forms too (``\\uXXXX`` and ``%XX`` escapes, base64, a newline
        inside: :mod:`._mask`). Not a checkpoint."""
        secrets = set(self.env.values())
        for value in self.headers.values():
            secrets.add(value)
            secrets.add(value.partition(" ")[2])
        return mask(text, secrets)

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"


def server_from_table(name: str, table: Any) -> McpServer:
    """The server a ``[mcp.NAME]`` table of a specs file declares; not a checkpoint.

    Raises:
      ValueError: a field is unknown or of the wrong type; the message names it.
      SpecError: the values are inconsistent (see :class:`McpServer`).
    """
    if not isinstance(table, Mapping):
        raise ValueError("must be a table")
    unknown = sorted(set(table) - set(TABLE_KEYS), key=str)
    if unknown:
        raise ValueError(f"field {unknown[0]!r} is unknown; the fields are {', '.join(TABLE_KEYS)}")
    fields: dict[str, Any] = {}
    for key in ("command", "url"):
        if key in table:
            if not isinstance(table[key], str):
                raise ValueError(f"field {key!r} must be a string")
            fields[key] = table[key]
    for key in ("args", "read_only"):
        if key in table:
            value = table[key]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"field {key!r} must be a list of strings")
            fields[key] = tuple(value)
    for key in ("env", "headers"):
        if key in table:
            value = table[key]
            if not isinstance(value, Mapping) or not all(
                isinstance(v, str) for v in value.values()
            ):
                raise ValueError(f"field {key!r} must be a table of strings")
            fields[key] = dict(value)
    if "start_timeout" in table:
        value = table["start_timeout"]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("field 'start_timeout' must be a number of seconds")
        try:
            fields["start_timeout"] = float(value)
        except OverflowError:
            fields["start_timeout"] = math.inf
    return McpServer(name, **fields)
