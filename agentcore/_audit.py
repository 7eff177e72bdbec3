"""Recording audit entries: an entry is recorded, or the caller gets an AuditError.

Audit fails closed: every layer that records an entry before (or after) an action
goes through :func:`record` (or :func:`record_within` when the wait is bounded),
so a sink that raises or does not answer turns into the same :class:`AuditError`,
with the same text, everywhere.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import trio

from ._errors import AuditError, describe

if TYPE_CHECKING:
    from ledger import Record, Sink


async def record(sink: Sink, entry: Record) -> None:
    """Record ``entry`` in ``sink``. A checkpoint when the sink's ``record`` is.

    Raises:
      AuditError: the sink raised (its exception chained): the caller must not go
        on with the action the entry records.
    """
    try:
        await sink.record(entry)
    except Exception as exc:
        raise AuditError(
            f"the audit sink failed to record {entry.kind!r}: {describe(exc)}"
        ) from exc


def overrun(kind: str, bound: float) -> AuditError:
    """The :class:`AuditError` of an entry of ``kind`` that the sink did not record
    within ``bound`` seconds (for a caller whose own scope bounds the wait)."""
    return AuditError(f"the audit sink did not record {kind!r} within {bound:g}s")


async def record_within(sink: Sink, entry: Record, bound: float, *, shield: bool = False) -> None:
    """:func:`record`, waiting at most ``bound`` seconds (shielded from outside
    cancellation with ``shield``, for an entry recorded while a task ends). A checkpoint.

    Raises:
      AuditError: the sink raised, or did not answer in time (:func:`overrun`).
    """
    with trio.move_on_after(bound, shield=shield):
        await record(sink, entry)
        return
    raise overrun(entry.kind, bound)


def batch_failure(group: BaseExceptionGroup[BaseException]) -> AuditError | None:
    """The AuditError a group of concurrent failures ends with, when all of them are
    AuditErrors (entries of parallel work that could not be recorded): it names the
    first entry that failed and how many did; the caller chains the group to it.
    None for any other group (a cancel among them, say), which goes on as it is.
    """
    failures, rest = group.split(AuditError)
    if failures is None or rest is not None:
        return None
    leaves: list[BaseException] = []
    stack: list[BaseException] = [failures]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(reversed(exc.exceptions))
        else:
            leaves.append(exc)
    text = str(leaves[0])
    if len(leaves) > 1:
        text += (
            f" (the first of {len(leaves)} entries of one batch of parallel tool calls "
            "that could not be recorded)"
        )
    return AuditError(text)


class _Recorded:
    # An awaitable already complete, without a checkpoint: what a run's audit gives
    # when it has no sink, so the hot path builds neither a Record nor a coroutine.
    __slots__ = ()

    def __await__(self) -> Generator[Any, Any, None]:
        return iter(())  # type: ignore[return-value]


#: Awaiting it does nothing (not a checkpoint).
NOTHING_TO_RECORD = _Recorded()
