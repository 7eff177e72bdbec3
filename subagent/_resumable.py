"""What ``Pool.resume`` checks before it queues a paused run: agentcore's own check,
on the names a spec binds."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from agentcore._resume import check_resumable as check_resumable


@attrs.frozen
class Names:
    """A spec's agent id and tools by name, as ``check_resumable`` reads an Agent."""

    agent_id: str
    tools_by_name: Mapping[str, object]
    #: The pool starts a state's background children again (see ``_bgstate``).
    takes_background: bool = True
