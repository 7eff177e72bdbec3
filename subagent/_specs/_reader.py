"""Reading a mapping of specs into :class:`SpecFile`: the pool settings, the rate
limits, the defaults, the agents and the MCP servers, each value checked, each error a
:class:`SpecFileError` naming the source, the agent and the field. The format and the
limits are described in ``_specs._file``; reading the file is there too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from agentcore import ChatModel, RetryPolicy, Tool
from agentcore.models import FallbackModel, RateLimited, RateLimiter

from .._cost._budget import Budget
from .._errors import SpecError
from ..mcp._config import NAME, McpServer, server_from_table
from ._limits import read_budget, read_limits, read_retry
from ._outputschema import read_output_schema, read_retries
from ._spec import Defaults, Spec

#: Tools that belong to a pool, added by :meth:`SpecFile.specs_for`.
POOL_TOOLS = ("subagent", "subagent_results")
POOL_KEYS = {
    "max_concurrent": int,
    "max_queued": int,
    "max_depth": int,
    "max_children": int,
    "children_timeout": float,
}
AGENT_KEYS = frozenset(
    {
        "description",
        "model",
        "max_messages",
        "system_prompt",
        "tools",
        "max_turns",
        "timeout",
        "idle_timeout",
        "critical",
        "max_children",
        "agent_id",
        "delegates_to",
        "limits",
        "tool_timeout",
        "hook_timeout",
        "retry",
        "max_parallel_tools",
        "history_limit",
        "output_retries",
        "output_schema",
        "budget",
    }
)
#: The agent settings an agent table and [defaults] may set, with their kind (``retry``
#: is a table of RetryPolicy's fields; hooks have no textual form).
SETTING_KEYS = {
    "tool_timeout": float,
    "hook_timeout": float,
    "max_parallel_tools": int,
    "history_limit": int,
}
DEFAULTS_KEYS = ("model", "agent_id", "limits", *SETTING_KEYS, "retry", "output_retries", "budget")
#: RetryPolicy's fields a ``retry`` table may set: each its kind, and whether 0 is
#: allowed (``jitter`` is also at most 1, so a delay is never negative).
ModelResolver = Callable[[str], ChatModel]


class SpecFileError(SpecError):
    """A specs file or mapping is invalid; the message names the source, agent and field."""


@attrs.frozen
class SpecFile:
    """What a specs file declares: agent specs, pool settings and defaults.

    Attributes:
      source: Where it came from (the file path, or ``<mapping>``).
      specs: The agents, in file order, without the pool's tools.
      pool_tools: Per agent, the pool tools it listed (``subagent``, ``subagent_results``).
      pool: Keyword arguments for :func:`subagent.open_pool` (limits only).
      defaults: The defaults agents inherit.
      mcp: The MCP servers (``[mcp.NAME]``), for ``open_pool(mcp=...)``.
      mcp_tools: Per agent, the MCP tools it listed (``"NAME"`` or ``"NAME/TOOL"``).
      budget: The pool's budget (``[pool.budget]``), for ``open_pool(budget=...)``.
    """

    source: str
    specs: tuple[Spec, ...]
    pool_tools: Mapping[str, tuple[str, ...]]
    pool: Mapping[str, int | float]
    defaults: Defaults
    mcp: tuple[McpServer, ...] = ()
    mcp_tools: Mapping[str, tuple[str, ...]] = attrs.Factory(dict)
    budget: Budget | None = None

    def specs_for(
        self,
        pool_tools: Mapping[str, Tool],
        mcp_tools: Callable[..., tuple[Tool, ...]] | None = None,
    ) -> tuple[Spec, ...]:
        """The specs, each given the pool tools it listed, from ``pool_tools`` by name
        (e.g. ``{"subagent": SubagentTool(pool), "subagent_results":
        SubagentResultsTool(pool)}``), and the MCP tools it listed, from ``mcp_tools``
        (the pool's :meth:`~subagent.Pool.mcp_tools`). Of all a server lists
        (``"mcp:NAME"``), a tool named as one the agent has already is left out (and
        reported); one named explicitly (``"mcp:NAME/TOOL"``) is not.

        Raises:
          SpecError: an agent lists MCP tools and ``mcp_tools`` is not given, or a
            server has no tool of a listed name.
        """
        def added(spec: Spec) -> list[Tool]:
            tools = [pool_tools[n] for n in self.pool_tools.get(spec.name, ())]
            for ref in self.mcp_tools.get(spec.name, ()):
                if mcp_tools is None:
                    raise SpecError(f"{self.source}: agents list MCP tools; pass mcp_tools")
                if "/" in ref:
                    tools.extend(mcp_tools(*ref.split("/", 1)))
                else:
                    # All a server lists, but the names the agent has already.
                    taken = {t.name for t in (*spec.tools, *tools)}
                    tools.extend(mcp_tools(ref, taken=taken))
            return tools

        return tuple(
            attrs.evolve(spec, tools=(*spec.tools, *more)) if (more := added(spec)) else spec
            for spec in self.specs
        )


class Reader:
    """Reads one mapping of specs, table by table and field by field; each error
    names the source, the agent and the field."""

    def __init__(
        self,
        source: str,
        tools: Mapping[str, Tool],
        workspace: str | Path | None,
        resolve_model: ModelResolver | None,
        base_dir: str | Path | None,
    ) -> None:
        self.source = source
        self.user_tools = tools
        self.workspace = workspace
        self.resolve_model = resolve_model
        self.base_dir = base_dir
        self._workspace_tools: dict[str, Tool] | None = None
        self.limiters: dict[str, RateLimiter] = {}
        self.default_model: ChatModel | None = None
        self.pool_budget: Budget | None = None

    def error(self, where: str, text: str) -> SpecFileError:
        return SpecFileError(f"{self.source}: {where}: {text}")

    def read(self, data: Mapping[str, Any]) -> SpecFile:
        if not isinstance(data, Mapping):
            raise SpecFileError(f"{self.source}: must be a table, not {_kind(data)}")
        unknown = sorted(set(data) - {"pool", "limits", "defaults", "agents", "mcp"}, key=str)
        if unknown:
            raise self.error(
                f"key {unknown[0]!r}",
                "unknown; the top-level tables are pool, limits, defaults, agents, mcp",
            )
        servers = self.mcp_servers(self.table(data, "mcp", "[mcp]"))
        pool = self.pool(self.table(data, "pool", "[pool]"))
        self.limiters = read_limits(self.table(data, "limits", "[limits]"), self.error, _kind)
        defaults = self.defaults(self.table(data, "defaults", "[defaults]"))
        agents = self.table(data, "agents", "[agents]")
        if not agents:
            raise self.error("[agents]", "no agents are defined")
        specs: list[Spec] = []
        listed: dict[str, tuple[str, ...]] = {}
        mcp_listed: dict[str, tuple[str, ...]] = {}
        for name, raw in agents.items():
            spec, pool_tools = self.agent(name, raw)
            mcp_listed[name] = self.mcp_refs(name, raw, servers)
            try:
                spec.inherit(defaults)
            except SpecError as exc:
                raise self.error(f"agent {name!r}", str(exc)) from None
            specs.append(spec)
            listed[name] = pool_tools
        return SpecFile(
            self.source, tuple(specs), listed, pool, defaults, tuple(servers.values()), mcp_listed,
            self.pool_budget,
        )

    def mcp_servers(self, table: Mapping[str, Any]) -> dict[str, McpServer]:
        servers: dict[str, McpServer] = {}
        for name, raw in table.items():
            try:
                servers[name] = server_from_table(name, raw)
            except (ValueError, SpecError) as exc:
                where = f"[mcp.{name}]" if NAME.fullmatch(name) else f"[mcp] {_shown(name)}"
                raise self.error(where, str(exc)) from None
        return servers

    def mcp_refs(self, agent: str, raw: Any, servers: Mapping[str, McpServer]) -> tuple[str, ...]:
        # The agent's "mcp:NAME" and "mcp:NAME/TOOL" tools, checked against [mcp].
        names = raw.get("tools", []) if isinstance(raw, Mapping) else []
        refs = tuple(n[4:] for n in names if isinstance(n, str) and n.startswith("mcp:"))
        for ref in refs:
            server = ref.split("/", 1)[0]
            if server not in servers:
                raise self.error(
                    f"agent {agent!r} field 'tools'",
                    f"tool {_shown('mcp:' + ref)} names no [mcp] server; "
                    f"declared: {', '.join(servers) or 'none'}",
                )
        return refs

    def table(self, data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, Mapping):
            raise self.error(where, f"must be a table, not {_kind(value)}")
        return value

    def pool(self, table: Mapping[str, Any]) -> dict[str, int | float]:
        settings: dict[str, int | float] = {}
        for key, value in table.items():
            if key == "budget":
                self.pool_budget = read_budget("[pool.budget]", value, self.error, _kind, _shown)
                continue
            kind = POOL_KEYS.get(key)
            if kind is None:
                raise self.error(
                    f"[pool] field {key!r}",
                    f"unknown; the fields are {', '.join(POOL_KEYS)}, budget",
                )
            settings[key] = self.number(f"[pool] field {key!r}", value, kind)
        return settings

    def defaults(self, table: Mapping[str, Any]) -> Defaults:
        unknown = sorted(set(table) - set(DEFAULTS_KEYS), key=str)
        if unknown:
            raise self.error(
                f"[defaults] field {unknown[0]!r}",
                f"unknown; the fields are {', '.join(DEFAULTS_KEYS)}",
            )
        model = None
        if "model" in table:
            model = self.model("[defaults] field 'model'", table["model"])
        self.default_model = model
        if "limits" in table:
            model = self.limited("[defaults] field 'limits'", table["limits"], model)
        agent_id = self.string("[defaults] field 'agent_id'", table.get("agent_id", ""))
        settings = self.settings(lambda key: f"[defaults] field {key!r}", table)
        return Defaults(model=model, agent_id=agent_id, **settings)

    def settings(self, field: Callable[[str], str], table: Mapping[str, Any]) -> dict[str, Any]:
        # The agent settings of an agent table or [defaults], as Spec/Defaults keywords.
        settings: dict[str, Any] = {}
        for key, kind in SETTING_KEYS.items():
            if key in table:
                settings[key] = self.number(field(key), table[key], kind)
        if "retry" in table:
            settings["retry"] = self.retry(field("retry"), table["retry"])
        if "output_retries" in table:
            settings["output_retries"] = read_retries(
                field("output_retries"), table["output_retries"], self.error, _kind
            )
        if "budget" in table:
            settings["budget"] = read_budget(field("budget"), table["budget"], self.error, _kind,
                                             _shown)
        return settings

    def retry(self, where: str, table: Any) -> RetryPolicy:
        return read_retry(where, table, self.error, _kind, _shown)

    def agent(self, name: str, raw: Any) -> tuple[Spec, tuple[str, ...]]:
        where = f"agent {name!r}"
        if not isinstance(raw, Mapping):
            raise self.error(where, f"must be a table, not {_kind(raw)}")
        unknown = sorted(set(raw) - AGENT_KEYS, key=str)
        if unknown:
            raise self.error(
                f"{where} field {unknown[0]!r}",
                f"unknown; the fields are {', '.join(sorted(AGENT_KEYS))}",
            )

        def field(key: str) -> str:
            return f"{where} field {key!r}"

        kwargs: dict[str, Any] = {}
        for key in ("description", "system_prompt", "agent_id"):
            if key in raw:
                kwargs[key] = self.string(field(key), raw[key])
        if "model" in raw:
            kwargs["model"] = self.model(field("model"), raw["model"])
        if "limits" in raw:
            model = kwargs.get("model", self.default_model)
            kwargs["model"] = self.limited(field("limits"), raw["limits"], model)
        if "max_turns" in raw:
            kwargs["max_turns"] = self.number(field("max_turns"), raw["max_turns"], int)
        for key in ("max_children", "max_messages"):
            if key in raw:
                kwargs[key] = self.number(field(key), raw[key], int)
        if "timeout" in raw:
            kwargs["timeout"] = self.number(field("timeout"), raw["timeout"], float)
        if "idle_timeout" in raw:
            value = raw["idle_timeout"]
            kwargs["idle_timeout"] = (
                None if value is False else self.number(field("idle_timeout"), value, float)
            )
        if "critical" in raw:
            if not isinstance(raw["critical"], bool):
                raise self.error(
                    field("critical"), f"must be true or false, not {_kind(raw['critical'])}"
                )
            kwargs["critical"] = raw["critical"]
        if "delegates_to" in raw:
            names = raw["delegates_to"]
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise self.error(
                    field("delegates_to"), f"must be a list of agent names, not {_kind(names)}"
                )
            kwargs["delegates_to"] = tuple(names)
        kwargs.update(self.settings(field, raw))
        if "output_schema" in raw:
            kwargs["output_type"] = read_output_schema(
                field("output_schema"), raw["output_schema"], self.error, _kind
            )
        tools, pool_tools = self.tools(field("tools"), raw.get("tools", []))
        try:
            spec = Spec(name, tools=tools, **kwargs)
        except (TypeError, ValueError) as exc:
            raise self.error(where, str(exc)) from None
        return spec, pool_tools

    def tools(self, where: str, names: Any) -> tuple[tuple[Tool, ...], tuple[str, ...]]:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise self.error(where, f"must be a list of tool names, not {_kind(names)}")
        tools: list[Tool] = []
        pool_tools: list[str] = []
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise self.error(where, f"names tool {name!r} twice")
            seen.add(name)
            if name in POOL_TOOLS:
                pool_tools.append(name)
            elif name.startswith("mcp:"):
                continue  # resolved against the pool's MCP sessions (specs_for)
            else:
                tools.append(self.tool(where, name))
        return tuple(tools), tuple(pool_tools)

    def tool(self, where: str, name: str) -> Tool:
        if name in self.user_tools:
            return self.user_tools[name]
        builtins = self.builtin_tools()
        if name in builtins:
            return builtins[name]
        if self.workspace is None and name in WORKSPACE_TOOL_NAMES:
            raise self.error(where, f"tool {name!r} needs a workspace root, and none was given")
        known = sorted({*self.user_tools, *builtins, *WORKSPACE_TOOL_NAMES, *POOL_TOOLS})
        raise self.error(where, f"unknown tool {name!r}; known tools: {', '.join(known)}")

    def builtin_tools(self) -> dict[str, Tool]:
        if self._workspace_tools is None:
            self._workspace_tools = {}
            if self.workspace is not None:
                from ..tools import workspace_tools

                try:
                    found = workspace_tools(Path(self.workspace))
                except (OSError, ValueError) as exc:
                    raise self.error("workspace", str(exc)) from None
                self._workspace_tools = {t.name: t for t in found}
        return self._workspace_tools

    def limited(self, where: str, value: Any, model: ChatModel | None) -> ChatModel:
        name = self.string(where, value)
        if name not in self.limiters:
            known = ", ".join(sorted(self.limiters)) or "none are defined"
            raise self.error(where, f"no [limits.{name}] table; known limits: {known}")
        if model is None:
            raise self.error(where, "no model to limit: give it a model or [defaults] one")
        return RateLimited(model, limiter=self.limiters[name])

    def model(self, where: str, value: Any) -> ChatModel:
        if isinstance(value, list):
            if not value:
                raise self.error(where, "an empty list names no model")
            models = [self.model(f"{where} [{i}]", item) for i, item in enumerate(value)]
            return models[0] if len(models) == 1 else FallbackModel(*models)
        text = self.string(where, value)
        try:
            if self.resolve_model is not None:
                model = self.resolve_model(text)
            else:
                from agentcore.models import resolve_model

                model = resolve_model(text, base_dir=self.base_dir)
        except Exception as exc:
            raise self.error(where, str(exc)) from exc
        return model

    def string(self, where: str, value: Any) -> str:
        if not isinstance(value, str):
            raise self.error(where, f"must be a string, not {_kind(value)}")
        return value

    def number(self, where: str, value: Any, kind: type) -> Any:
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(where, f"must be an integer, not {_kind(value)}")
            if value < 1:
                raise self.error(where, f"must be at least 1, not {_shown(value)}")
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(where, f"must be a number of seconds, not {_kind(value)}")
        try:
            seconds = float(value)
        except OverflowError:  # an integer beyond any float
            seconds = math.inf
        if not (seconds > 0 and math.isfinite(seconds)):
            raise self.error(where, f"must be a positive number of seconds, not {_shown(value)}")
        return seconds


WORKSPACE_TOOL_NAMES = ("read_file", "list_dir", "grep", "write_file")


def _kind(value: Any) -> str:
    names = {
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        list: "a list",
        dict: "a table",
    }
    for kind, text in names.items():
        if type(value) is kind:
            return f"{text} ({_shown(value)})" if kind in (str, bool, int, float) else text
    return type(value).__name__


def _shown(value: object, limit: int = 80) -> str:
    # A value in an error message: its repr, cut short (a field may hold a megabyte).
    try:
        text = repr(value)
    except ValueError:  # an integer with more digits than str() converts
        return "(an integer too long to show)"
    return text if len(text) <= limit else f"{text[: limit - 12]}...{text[-8:]}"
