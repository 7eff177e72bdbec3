"""``subagent resume``'s claim in the ledger chain: a ``resume_claimed`` entry naming
the paused state's resume key, recorded before the resumed run does anything. A state
whose key the ledger records already is refused, so that a copy of a paused-run file
made before its resume (each copy holds no claim of its own) does not run its
approved calls again, as long as it is resumed with the same ledger.

The check reads the ledger before the claim and again after it (entries are numbered
under the ledger's writer lock): of two resumes of the same state, the one whose
claim has the lower number goes on, the other is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import trio

import ledger
from agentcore import RunState

from .._durable._claims import AlreadyResumedError, resume_key
from .._errors import SubagentError
from ._statefile import give_back, read_state, take_checked

if TYPE_CHECKING:
    from .._pool._pool import Pool

#: The kind of the ledger entry that claims a paused state's resume.
RESUME_CLAIMED = "resume_claimed"


class LedgerClaimError(SubagentError):
    """The ledger cannot be read to check whether a paused state was resumed already."""


def _claimed(path: Path, run_id: str, key: str, before: int | None) -> bool:
    # Whether the ledger at ``path`` holds a claim of ``key`` (numbered below ``before``).
    if not path.exists():
        return False
    try:
        entries = ledger.query(path, kind=RESUME_CLAIMED, run_id=run_id)
    except ledger.LedgerError as exc:
        raise LedgerClaimError(
            f"cannot check the ledger for an earlier resume of this paused run: {exc}"
        ) from None
    return any(e.data.get("resume_key") == key and (before is None or e.seq < before)
               for e in entries)


def _refused(state: RunState) -> AlreadyResumedError:
    return AlreadyResumedError(
        f"the paused run {state.run_id[:200]!r} was resumed already from this state "
        "(the ledger records it): resuming it again would run its approved calls again"
    )


async def check_unclaimed(path: Path, state: RunState) -> None:
    """Raise unless the ledger at ``path`` (missing: nothing recorded) holds no claim
    of ``state``. A checkpoint (reads the ledger in a thread).

    Raises:
      AlreadyResumedError: it does.
      LedgerClaimError: the ledger cannot be read.
    """
    key = resume_key(state)
    if await trio.to_thread.run_sync(_claimed, path, state.run_id, key, None):
        raise _refused(state)


async def claim_in_ledger(sink: ledger.Sink, path: Path, state: RunState) -> None:
    """Record the claim of ``state``'s resume through ``sink`` (the ledger at
    ``path``), then raise if an earlier claim of it is there. A checkpoint.

    Raises:
      AlreadyResumedError: the ledger records an earlier claim of this state.
      LedgerClaimError: the ledger cannot be read.
      ledger.SinkError: the claim cannot be recorded.
    """
    key = resume_key(state)
    entry = await sink.record(ledger.Record(
        kind=RESUME_CLAIMED, run_id=state.run_id, path=state.path, agent_id=state.agent,
        data={"resume_key": key},
    ))
    if entry is None:  # a sink that records nothing: nothing to compare with
        return
    if await trio.to_thread.run_sync(_claimed, path, state.run_id, key, entry.seq):
        raise _refused(state)


async def take_once(pool: Pool, file: Path, sink: ledger.Sink, path: Path) -> RunState:
    """The paused run in ``file``, checked against ``pool``'s specs and the ledger at
    ``path``, taken (claimed in the file) and claimed in the ledger through ``sink``:
    what ``subagent resume`` continues. A checkpoint.

    Raises:
      StateFileError: as ``take_checked`` (the file resumed already, among others).
      AlreadyResumedError: as :func:`claim_in_ledger`.
      LedgerClaimError: the ledger cannot be read, or the claim cannot be recorded
        (the file is then given back as it was).
      SubagentError, agentcore.ResumeError: as ``Pool.resume``'s checks.
    """
    # Checked before the file is taken: a state the ledger refuses leaves it as it was.
    await check_unclaimed(path, await trio.to_thread.run_sync(read_state, file))
    state = await take_checked(pool, file)
    try:
        await claim_in_ledger(sink, path, state)
    except ledger.LedgerError as exc:
        # Not recorded, so nothing ran: the file is given back, to be resumed later.
        await trio.to_thread.run_sync(give_back, file, state)
        raise LedgerClaimError(
            f"cannot record the resume in the ledger ({exc}); the paused run {file} is "
            "left as it was") from None
    return state
