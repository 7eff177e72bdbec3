"""What every ``subagent`` command shares: exit codes and the default gate.

Commands in subpackages (``subagent.temporal``) import these from here, never from
``_cli``, which imports them.
"""

from __future__ import annotations

import trio

from agentcore import GateDecision, GateRequest, read_only

from .._delegation._tool import SubagentTool

EXIT_OK, EXIT_TASK_FAILED, EXIT_USAGE, EXIT_LEDGER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_PAUSED = 4


async def read_only_or_delegation(request: GateRequest) -> GateDecision:
    """The command's default gate: read-only tools and delegation are allowed.

    Delegating changes nothing by itself, and each subagent's own tool calls pass
    this same gate. A checkpoint.
    """
    if isinstance(request.tool, SubagentTool):  # by what it is: any tool may be "subagent"
        await trio.lowlevel.checkpoint()
        return GateDecision(True, "delegation")
    return await read_only(request)
