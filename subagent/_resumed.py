"""Resuming a paused state once: what identifies it, and the error of a second resume.

``Pool.resume`` with checkpoints records each paused state it resumes in the
checkpoint file (``SqliteCheckpoints.claim``, by its run id and :func:`resume_key`),
and refuses the same state a second time: its approved calls would run again.
"""

from __future__ import annotations

import hashlib

import msgspec

import agentcore

from ._errors import SubagentError


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
