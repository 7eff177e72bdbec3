"""Specs from data: a TOML file or a mapping of agents and pool settings.

The format::

    [pool]                      # optional; every key optional
    max_concurrent = 8
    max_queued = 1024
    max_depth = 4
    max_children = 5
    children_timeout = 30.0

    [pool.budget]               # optional: what all the pool's tasks may spend together
    tokens = 200000             # any of tokens, input_tokens, output_tokens, cost (US
    cost = 2.5                  # dollars), model_calls, tasks; warn_at (0.8), grace (30.0)

    [limits.openai]             # optional: rate limits agents share (RateLimiter)
    requests_per_minute = 500   # either or both
    tokens_per_minute = 200000

    [defaults]                  # optional: what agents inherit
    model = "openai:gpt-4o-mini"
    agent_id = "my-app"
    limits = "openai"           # the defaults' model waits on [limits.openai]
    # tool_timeout, hook_timeout, max_parallel_tools, history_limit, retry and
    # output_retries too

    [agents.researcher]
    description = "Finds things out."
    model = "anthropic:claude-sonnet-4-5"   # "openai:...", "anthropic:...", "scripted:FILE"
    # or a list: a FallbackModel asking each in turn on a transient error
    # model = ["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"]
    # limits = "openai"                     # its model (else the defaults') waits there
    system_prompt = "You research."
    tools = ["read_file", "grep", "subagent"]  # built-ins, the caller's own, "subagent"
    max_turns = 10
    timeout = 600.0
    idle_timeout = 300.0                    # or false to disable the watchdog
    critical = false
    max_children = 3
    max_messages = 50                       # the conversation bound (history compression)
    history_limit = 200000                  # ...and its bound in characters
    tool_timeout = 120.0                    # agent settings (unset: [defaults], then
    hook_timeout = 5.0                      # agentcore's own defaults); hooks have
    max_parallel_tools = 8                  # no textual form
    retry = { max_attempts = 5, max_delay = 30.0 }   # any of RetryPolicy's fields
    output_retries = 2                      # invalid typed answers retried (0 or more)

    [agents.researcher.output_schema]       # typed output: a JSON Schema (needs the
    type = "object"                         # extra "schema": jsonschema); see below
    required = ["findings"]
    properties.findings = { type = "array", items = { type = "string" } }
    budget = { tokens = 50000, tasks = 10 }   # each task's subtree (also in [defaults])

    [mcp.time]                  # an MCP server: command/args/env (stdio) or url/headers
    command = "mcp-server-time"
    read_only = ["get_current_time", "convert_time"]   # only these count as read-only
    # start_timeout = 30.0

An agent with ``output_schema`` answers by calling a ``final_result`` tool whose
arguments must be valid against the schema (an object schema with ``properties`` is
the arguments; any other is wrapped as ``{"result": ...}``); ``Result.structured``
holds the decoded JSON. The schema is checked when the file is read, with the
``jsonschema`` library (``pip install 'subagent[schema]'``): at most 64 KiB as JSON
and 32 levels deep, references only within itself, no ``pattern``,
``patternProperties`` or ``uniqueItems`` (see ``subagent.JsonSchemaOutput``).

Tool names resolve against the caller's registry, then the workspace tools
(``read_file``, ``list_dir``, ``grep``, ``write_file``, given a workspace root).
``subagent`` (the delegation tool) and ``subagent_results`` (waiting for background
subagents) belong to a pool: they are added when the specs are bound to one
(:meth:`SpecFile.specs_for`). So do MCP tools: ``"mcp:NAME"`` names every tool
server ``NAME`` lists, ``"mcp:NAME/TOOL"`` one of them (``NAME`` is a ``[mcp.NAME]``
table; see :class:`subagent.mcp.McpServer`).

A specs file is read as untrusted input, within these limits:

- the file itself is a regular file of at most :data:`MAX_SPECS_BYTES` (1 MiB);
- a ``scripted:FILE`` model is relative to the specs file's folder and must be a
  regular file of at most 16 MiB (``ReplayModel.from_file``'s ``max_bytes``). Any regular
  file the specs author names is allowed, ``..`` and absolute paths included (the
  author is trusted to pick the replay file, as they pick the model), but a FIFO, a
  device or a directory is refused before it is read, and never waited on;
- any parse failure (bad TOML or UTF-8, nesting too deep for the parser, an integer
  too long to convert) and any wrong field is a :class:`SpecFileError` naming the file
  as it was given, the agent and the field. Nothing else escapes :func:`load_specs`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentcore import Tool
from agentcore.models._replay import read_regular_file

from ._reader import AGENT_KEYS as AGENT_KEYS
from ._reader import POOL_KEYS as POOL_KEYS
from ._reader import POOL_TOOLS as POOL_TOOLS
from ._reader import ModelResolver as ModelResolver
from ._reader import Reader
from ._reader import SpecFile as SpecFile
from ._reader import SpecFileError as SpecFileError

#: The largest specs file :func:`load_specs` reads (1 MiB).
MAX_SPECS_BYTES = 1024 * 1024


def load_specs(
    path: str | Path,
    *,
    tools: Mapping[str, Tool] | None = None,
    workspace: str | Path | None = None,
    resolve_model: ModelResolver | None = None,
) -> SpecFile:
    """Read a TOML specs file. Reads the file (blocking; call it before the event loop or
    in a thread); not a checkpoint.

    Args:
      path: The TOML file. ``scripted:`` model files are relative to its folder.
      tools: Your own tools by name (they win over the built-ins).
      workspace: The root the workspace tools are confined to; without it, naming one
        of them is an error.
      resolve_model: Turns a model string into a ChatModel; by default
        ``agentcore.models.resolve_model``.

    Raises:
      SpecFileError: the file is missing, not a regular file, larger than
        :data:`MAX_SPECS_BYTES` or not TOML, or a field is wrong; the message names the
        file (as given), the agent and the field.
    """
    path = Path(path)
    try:
        raw = read_regular_file(path, MAX_SPECS_BYTES)
    except ValueError as exc:
        raise SpecFileError(f"{path}: cannot read the specs file: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecFileError(f"{path}: the specs file is not UTF-8 text") from None
    try:
        data = tomllib.loads(text)
    except RecursionError:
        # tomllib parses nested arrays and inline tables recursively.
        raise SpecFileError(f"{path}: invalid TOML: values are nested too deeply") from None
    except ValueError as exc:  # TOMLDecodeError, or an integer too long to convert
        raise SpecFileError(f"{path}: invalid TOML: {exc}") from None
    return specs_from_mapping(
        data,
        source=str(path),
        tools=tools,
        workspace=workspace,
        resolve_model=resolve_model,
        base_dir=path.parent,
    )


def specs_from_mapping(
    data: Mapping[str, Any],
    *,
    source: str = "<mapping>",
    tools: Mapping[str, Tool] | None = None,
    workspace: str | Path | None = None,
    resolve_model: ModelResolver | None = None,
    base_dir: str | Path | None = None,
) -> SpecFile:
    """The same as :func:`load_specs`, from an already parsed mapping; not a checkpoint."""
    reader = Reader(source, tools or {}, workspace, resolve_model, base_dir)
    return reader.read(data)
