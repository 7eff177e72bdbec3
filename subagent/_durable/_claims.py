"""Resuming a paused state once: what identifies it, and the error of a second resume.

``Pool.resume`` with checkpoints records each paused state it resumes in the
checkpoint file (``SqliteCheckpoints.claim``, by its run id and :func:`resume_key`),
and refuses the same state a second time: its approved calls would run again.
Without checkpoints the pool remembers the keys it resumed (:class:`MemoryClaims`,
for the pool's life); ``subagent resume`` records them in the state file and the
ledger (``_statefile``, ``_ledgerclaim``).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec

import agentcore

from .._errors import SubagentError

T = TypeVar("T")


class AlreadyResumedError(SubagentError):
    """``Pool.resume`` was given a paused state that this pool's checkpoints record as
    resumed already: resuming it again would run its approved calls again."""


def resume_key(state: agentcore.RunState) -> str:
    """What identifies a paused state across its answers: ``sha256:`` over each run
    of its tree's run id, counters, conversation and pending call ids (not the
    answers, which change until it is resumed). Not a checkpoint; O(its size)."""
    digest = hashlib.sha256()
    stack = [state]
    while stack:
        node = stack.pop()
        digest.update(_key_encoder.encode([
            node.run_id, node.turn, node.tool_calls,
            [[m.role, m.content, m.tool_call_id, [[c.id, c.name, c.arguments]
                                                  for c in m.tool_calls]]
             for m in node.messages],
            [p.call.id for p in node.pending],
        ]))
        stack.extend(reversed(node.children))
    return "sha256:" + digest.hexdigest()


_key_encoder = msgspec.json.Encoder()


def already_resumed(state: agentcore.RunState) -> AlreadyResumedError:
    """The error of a second ``Pool.resume`` of ``state``."""
    return AlreadyResumedError(
        f"the paused run {state.run_id[:200]!r} was resumed already from this state "
        "(the pool's checkpoints record it): resuming it again would run its approved "
        "calls again"
    )


class MemoryClaims:
    """The resume keys a pool without checkpoints has resumed, so that it refuses the
    same paused state a second time (the newest ``limit`` kept). In memory only: a
    new pool (a new process) does not know them."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._keys: dict[str, None] = {}  # in the order taken

    async def claim_and_submit(
        self, state: agentcore.RunState, submit: Callable[[], Awaitable[T]]
    ) -> T:
        """Record ``state``'s key, then ``submit()``; the key is forgotten if that
        raises (nothing was queued). A checkpoint when ``submit`` is.

        Raises:
          AlreadyResumedError: this pool resumed the same state already.
        """
        key = resume_key(state)
        if key in self._keys:
            raise AlreadyResumedError(
                f"the paused run {state.run_id[:200]!r} was resumed already from this "
                "state by this pool: resuming it again would run its approved calls again")
        self._keys[key] = None
        while len(self._keys) > self._limit:
            del self._keys[next(iter(self._keys))]
        try:
            return await submit()
        except BaseException:
            with contextlib.suppress(KeyError):
                del self._keys[key]
            raise

    def claimed(self, state: agentcore.RunState) -> bool:
        """Whether this pool resumed ``state`` already. Not a checkpoint."""
        return resume_key(state) in self._keys
