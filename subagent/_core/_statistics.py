"""PoolStatistics: a snapshot of a pool's counts and limits."""

from __future__ import annotations

import attrs


@attrs.frozen
class PoolStatistics:
    """A snapshot of a :class:`Pool`. ``accepted == queued + running + finished + failed +
    cancelled + paused`` at every instant."""

    running: int
    """Tasks started and not ended (a parent waiting for its subagent counts)."""
    queued: int
    """Tasks accepted and not started."""
    finished: int
    """Tasks that ended ``stop``, ``max_turns`` or ``interrupted``."""
    failed: int
    """Tasks that ended ``error`` or timed out."""
    cancelled: int
    """Tasks aborted, or never started because of a cancel."""
    accepted: int
    """Tasks ever accepted (the last path number)."""
    holding_slots: int
    """Running tasks holding a concurrency slot (not waiting on a subagent)."""
    waiting_submitters: int
    """Submits blocked on a full queue."""
    max_concurrent: int
    """The bound on runs holding a slot."""
    max_queued: int
    """The bound on queued tasks."""
    max_depth: int
    """The longest AgentPath a task may have."""
    closed: bool
    """Whether the pool accepts no new task from outside."""
    paused: int = 0
    """Tasks whose run paused for a human's approval (``accepted`` counts them too)."""
