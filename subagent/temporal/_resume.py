"""The seam where a retried activity attempt picks up from the last heartbeat.

An attempt heartbeats a :class:`Heartbeat` at every turn boundary (and on a timer, so
that a cancel reaches it). Temporal keeps the latest one; when the attempt's worker
is lost and the activity is retried, the next attempt gets it back in
``activity.info().heartbeat_details`` and calls :func:`start_state` on it.

Today a heartbeat is a progress marker (attempt, events and turn boundaries seen)
and :func:`start_state` returns ``None``: the new attempt starts the tree over
(which is why :class:`~subagent.temporal.RunOptions` defaults to one attempt). The
durable-runs issue (``agentcore.RunState``) fills this seam:

1. ``Heartbeat.state`` carries ``RunState.to_json()`` of the root (children
   included), set by the runner at each turn boundary;
2. :func:`start_state` returns ``RunState.from_json(heartbeat.state)``;
3. the runner calls ``Pool.resume(state)`` instead of ``Pool.submit`` when it is not
   ``None``, with the never-repeat rule for finished mutating tool calls.

Heartbeat details come back from the server: they are checked like any outside input
(size cap :data:`MAX_HEARTBEAT_CHARS`, exact shape), and anything else is ignored
(the attempt starts over), never an exception in the activity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

#: The version of the heartbeat payload this module writes and reads.
VERSION = 1
#: The largest heartbeat state accepted back (characters); a bigger one is ignored.
MAX_HEARTBEAT_CHARS = 8 * 1024 * 1024


@attrs.frozen
class Heartbeat:
    """What an attempt heartbeats: where the run was at its last turn boundary.

    Attributes:
      attempt: The activity attempt that sent it (from 1).
      events: Events the attempt had reported.
      turns: Turn boundaries (``turn_start`` events of any run of the tree) seen.
      state: The tree's serialized run state; ``None`` until issue 20 provides one.
    """

    attempt: int
    events: int
    turns: int
    state: str | None = None

    def payload(self) -> dict[str, Any]:
        """The JSON-ready value passed to ``activity.heartbeat``."""
        return {"version": VERSION, "attempt": self.attempt, "events": self.events,
                "turns": self.turns, "state": self.state}


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53:
        return value
    return None


def last_heartbeat(details: Sequence[Any]) -> Heartbeat | None:
    """The :class:`Heartbeat` in ``heartbeat_details`` (the latest one), or ``None`` when
    there is none or it is not one this version wrote. Not a checkpoint."""
    if len(details) != 1 or not isinstance(details[0], dict):
        return None
    raw = details[0]
    if raw.get("version") != VERSION:
        return None
    attempt, events, turns = (_count(raw.get(k)) for k in ("attempt", "events", "turns"))
    state = raw.get("state")
    if attempt is None or events is None or turns is None:
        return None
    if state is not None and (not isinstance(state, str) or len(state) > MAX_HEARTBEAT_CHARS):
        return None
    return Heartbeat(attempt, events, turns, state)


#: What a retried attempt resumes from: issue 20 makes it ``agentcore.RunState``.
StartState = str


def start_state(heartbeat: Heartbeat | None) -> StartState | None:
    """The state a retried attempt resumes from, or ``None`` to start the tree over.

    Always ``None`` until issue 20's ``RunState`` exists; then
    ``RunState.from_json(heartbeat.state)`` when ``heartbeat.state`` is set (and a
    :class:`~subagent.temporal.TemporalError` naming what was wrong when it does not
    decode). Not a checkpoint.
    """
    del heartbeat
    return None
