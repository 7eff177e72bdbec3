"""The seam where a retried activity attempt picks up from the last heartbeat.

An attempt heartbeats a :class:`Heartbeat` at every turn boundary (and on a timer, so
that a cancel reaches it). Temporal keeps the latest one; when the attempt's worker
is lost and the activity is retried, the next attempt gets it back in
``activity.info().heartbeat_details`` and calls :func:`start_state` on it.

A heartbeat carries the tree's checkpoints (``state``: the rows of
:class:`~._checkpointing.HeartbeatCheckpoints`), recorded on the server at every
checkpoint of any run of the tree (turn boundary, before each mutating call, end),
plus a progress marker (attempt, events and turn boundaries seen). A retried
attempt gets them back; :func:`start_state` decodes them and the runner resumes the
tree with ``subagent._durable._recovery.recover``: the never-repeat rule for the calls that
were in flight, as after a local crash.

Heartbeat details come back from the server: they are checked like any outside input
(size cap :data:`MAX_HEARTBEAT_CHARS`, exact shape). A payload of another version or
shape is ignored (the attempt starts over); a state that does not decode fails the
attempt's run (it must not start over: a finished mutating call would run again).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from .._durable._store import CheckpointRow
from ._checkpointing import decode_rows

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
      state: The tree's checkpoints (JSON rows); ``None`` before the first one.
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
    # Compared by type too: True and 1.0 equal 1.
    version = raw.get("version")
    if type(version) is not int or version != VERSION:
        return None
    attempt, events, turns = (_count(raw.get(k)) for k in ("attempt", "events", "turns"))
    state = raw.get("state")
    if attempt is None or events is None or turns is None:
        return None
    if state is not None and (not isinstance(state, str) or len(state) > MAX_HEARTBEAT_CHARS):
        return None
    return Heartbeat(attempt, events, turns, state)


def start_state(heartbeat: Heartbeat | None) -> list[CheckpointRow] | None:
    """The checkpoints a retried attempt resumes from (the last checkpoint of every
    run of the tree still running or paused), or ``None`` to start the tree over:
    no heartbeat, or one sent before the first checkpoint (no mutating call ran
    then: each is preceded by a ``call`` checkpoint). Not a checkpoint.

    Raises:
      CheckpointError: the heartbeat's state does not decode (see
        :func:`~._checkpointing.decode_rows`); the attempt must not start over.
    """
    if heartbeat is None or heartbeat.state is None:
        return None
    return decode_rows(heartbeat.state, MAX_HEARTBEAT_CHARS)
