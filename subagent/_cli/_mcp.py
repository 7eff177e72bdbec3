"""The pool as an MCP server: ``subagent mcp SPECS`` serves each agent of a specs file
as an MCP tool over stdio.

Each agent is a tool of the same name taking ``{"task": "..."}``; a call submits the
task to one pool (bounded, gated, audited like ``subagent run``) and answers with the
task's output, or an error result saying how the task ended. A client's
``notifications/cancelled`` cancels the task (and so its subagents and their tool
calls; ledger cause ``caller``); a client that closes stdin (or dies) ends the server,
whose pool is cancelled with the calls in flight (cause ``pool_closed``). Each
request (line of stdin) is at most 4 MiB (:mod:`._serve_stdio`). When the client asks
for progress, each event of the task's tree is sent as a progress notification
(``"PATH: KIND"``); events the client is too slow for are dropped, never slowing the
agents (at most :data:`PROGRESS_BUFFER` wait).

This module has no ``from __future__ import annotations``: the SDK reads the tool
functions' annotations (``Context``) at registration.
"""

from pathlib import Path
from typing import Any

import attrs
import trio

from agentcore import Tool, ToolGate

from .._core._core import CancelCause
from .._delegation._results import SubagentResultsTool
from .._delegation._tool import SubagentTool
from .._errors import TaskError, format_path
from .._pool._open import open_pool
from .._pool._pool import Pool
from .._safe_text import one_line
from .._specs._file import SpecFile
from .._stream import Stream
from ._serve_stdio import serve_stdio

#: Events of one call's tree waiting to go out as progress notifications.
PROGRESS_BUFFER = 64
#: Seconds the progress already buffered may take to go out once the task has ended.
PROGRESS_FLUSH = 5.0
#: The longest progress message (characters).
MAX_PROGRESS_MESSAGE = 200


@attrs.define(eq=False)
class _Client:
    """What the server knows of its client: whether stdin has ended, and which of the
    calls in flight it cancelled (``notifications/cancelled``, read before the end of
    stdin): a call cancelled when both happened is told by this, not by the order in
    which the server's tasks see them."""

    gone: trio.Event = attrs.Factory(trio.Event)
    #: The request id of each call in flight: whether the client cancelled it.
    calls: dict[str, bool] = attrs.Factory(dict)

    def cancelled(self, request_id: str) -> None:
        """The client's ``notifications/cancelled`` of ``request_id`` was read (one of
        a call not in flight is dropped). Not a checkpoint."""
        if request_id in self.calls:
            self.calls[request_id] = True


def _agent_tool(pool: Pool, name: str, client: _Client) -> Any:
    from mcp.server.mcpserver import Context

    async def run_agent(task: str, ctx: Context) -> str:
        stream = Stream(PROGRESS_BUFFER, overflow="drop_newest")
        request_id = ctx.request_id
        client.calls[request_id] = False
        outcome: Any = None
        try:
            handle = await pool.submit(name, task, events=stream)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_progress, stream, ctx)
                try:
                    outcome = await handle.wait()
                except TaskError as exc:
                    outcome = exc
                except BaseException:
                    # The client cancelled the call (caller), or it has gone: stdin
                    # ended, the server stops and cancels the pool (pool_closed, as the
                    # tasks it left running).
                    if client.gone.is_set() and not client.calls.get(request_id):
                        handle._cancel_for(CancelCause.pool_closed)
                    else:
                        handle.cancel()
                    raise
                finally:
                    # The events already buffered still go out, within a bound.
                    stream.close()
                    nursery.cancel_scope.deadline = trio.current_time() + PROGRESS_FLUSH
        finally:
            client.calls.pop(request_id, None)
        if isinstance(outcome, TaskError):
            raise RuntimeError(f"the task did not finish: {one_line(str(outcome))}")
        return str(outcome.output)

    return run_agent


async def _progress(stream: Stream, ctx: Any) -> None:
    count = 0
    async for ev in stream:
        count += 1
        text = one_line(f"{format_path(ev.path)}: {ev.kind}")[:MAX_PROGRESS_MESSAGE]
        await ctx.report_progress(count, None, text)


async def serve_specs(specs: SpecFile, *, gate: ToolGate, audit: Any) -> None:
    """Serve the agents of ``specs`` over this process's stdin and stdout until the
    client closes stdin. A checkpoint.

    Args:
      specs: The agents, pool limits and MCP servers.
      gate: The gate every tool call passes.
      audit: The ledger sink the runs write to.
    """
    from mcp.server.mcpserver import MCPServer

    defaults = attrs.evolve(specs.defaults, gate=gate, audit=audit)
    async with open_pool(**specs.pool, defaults=defaults, mcp=specs.mcp) as pool:  # type: ignore[arg-type]
        pool_tools: dict[str, Tool] = {
            "subagent": SubagentTool(pool),
            "subagent_results": SubagentResultsTool(pool),
        }
        for spec in specs.specs_for(pool_tools, pool.mcp_tools):
            pool.register(spec)
        server: MCPServer[Any] = MCPServer("subagent", instructions=_INSTRUCTIONS)
        client = _Client()
        for spec in specs.specs:
            server.add_tool(
                _agent_tool(pool, spec.name, client),
                name=spec.name,
                description=spec.description or f"Give the {spec.name} agent a task.",
            )
        await serve_stdio(server, on_eof=client.gone.set, on_cancel=client.cancelled)
        # The client has gone: tasks it left running are not waited for.
        pool.cancel()


_INSTRUCTIONS = (
    "Each tool is an agent: give it a task in plain words; it answers with its result."
)


def serve_specs_file(specs: SpecFile, *, gate: ToolGate, ledger_path: Path) -> None:
    """Run :func:`serve_specs` on trio with a ledger at ``ledger_path``; blocks."""
    from .._ledgerfile import open_sink

    async def main() -> None:
        sink = open_sink(ledger_path)
        try:
            await serve_specs(specs, gate=gate, audit=sink)
        finally:
            await sink.aclose()

    trio.run(main)
