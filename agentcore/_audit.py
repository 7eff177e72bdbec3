"""Recording audit entries: an entry is recorded, or the caller gets an AuditError.

Audit fails closed: every layer that records an entry before (or after) an action
goes through :func:`record` (or :func:`record_within` when the wait is bounded),
so a sink that raises or does not answer turns into the same :class:`AuditError`,
with the same text, everywhere.

A sink that never blocks (:class:`ledger.MemorySink`, or any sink offering a
synchronous ``record_nowait``) is recorded into without awaiting it: product
decision of issue 17, an audit entry recorded into such a sink need not be a trio
checkpoint. :func:`record` then only checks for cancellation (a cancelled recorder
records nothing, as before), and :func:`record_now` records the entries of an end
(which are shielded from cancellation anyway) without a shielded scope. A
``record_nowait`` that raises ``trio.WouldBlock`` (a MemorySink's record of more
than 64 KiB, redacted in a worker thread) falls back to ``await sink.record(...)``.

The hot path does not even await: :func:`record_sync` records into such a sink
from synchronous code when the current task is not cancelled, and says so; only
when it cannot (no ``record_nowait``, a cancelled task, a large record) does the
caller await :func:`record`, which then raises ``trio.Cancelled`` or waits. "Not
cancelled" is trio's public word for it: ``trio.current_effective_deadline()`` is
``-inf`` exactly when the next checkpoint would raise ``Cancelled`` (:func:`cancelled`).
Unlike ``checkpoint_if_cancelled`` it does not deliver a pending KeyboardInterrupt to
the main task: that waits for the next checkpoint.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from ledger._record import record_of

from ._errors import AuditError, describe
from ._fastpath import fields_nowait_of, nowait_of

if TYPE_CHECKING:
    from ledger import Record, Sink
    from ledger._entry import Scalar


def cancelled() -> bool:
    """Whether the calling trio task is cancelled: its next checkpoint would raise
    ``trio.Cancelled`` (public API: its effective deadline is ``-inf``). Not a
    checkpoint. Raises RuntimeError outside a trio task."""
    return trio.current_effective_deadline() == -math.inf


def failed(sink: Sink, kind: str, exc: Exception) -> AuditError:
    """The AuditError of ``sink``'s failure ``exc`` to record an entry of ``kind``.

    Its text never holds a host path (it reaches events, summaries and a parent's
    model; the exception itself is chained for the program): an OSError is told by
    its errno and strerror, without its file names, and a file sink's own ``path``
    (in a ``SinkError`` or ``SinkClosedError`` of ``ledger``) by its last part.
    """
    if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
        text = f"{type(exc).__name__}: [Errno {exc.errno}] {exc.strerror}"
    else:
        text = describe(exc)
        try:
            where = getattr(sink, "path", None)
            where = os.fspath(where) if isinstance(where, os.PathLike) else where
        except Exception:  # a sink's own property failing: no path to hide
            where = None
        if isinstance(where, str) and where:
            text = text.replace(where, os.path.basename(where) or "ledger")
    return AuditError(f"the audit sink failed to record {kind!r}: {text}")


def _nowait(sink: Sink, record_nowait: Callable[[Record], object], entry: Record) -> bool:
    # One record_nowait call: True when recorded, False on trio.WouldBlock.
    try:
        record_nowait(entry)
    except trio.WouldBlock:
        return False
    except Exception as exc:
        raise failed(sink, entry.kind, exc) from exc
    return True


def record_sync(sink: Sink, entry: Record) -> bool:
    """Record ``entry`` in ``sink`` now, from synchronous code, if it can be: the
    sink offers ``record_nowait`` and the current task is not cancelled. Not a
    checkpoint. True when recorded.

    False, having recorded nothing, otherwise (no ``record_nowait``, a cancelled
    task, or ``trio.WouldBlock`` from the sink): the caller then awaits
    :func:`record` with the same entry, which raises ``trio.Cancelled`` for a
    cancelled task (a cancelled recorder records nothing) or waits for the sink.

    Raises:
      AuditError: the sink raised (its exception chained).
    """
    # One frame: the cancellation check and _nowait inlined (each call is a
    # measurable part of an entry's cost). The check reads what
    # checkpoint_if_cancelled reads; a trio without that attribute takes the
    # awaited path.
    nowait = nowait_of(sink)
    if nowait is None:
        return False
    if cancelled():
        return False
    try:
        nowait(entry)
    except trio.WouldBlock:
        return False
    except Exception as exc:
        raise failed(sink, entry.kind, exc) from exc
    return True


def record_fields_sync(
    sink: Sink,
    cancellable: bool,
    kind: str,
    run_id: str,
    path: tuple[str, ...],
    agent_id: str,
    tool: str | None = None,
    call_id: str | None = None,
    arguments: str | None = None,
    verdict: str | None = None,
    reason: str | None = None,
    result: str | None = None,
    error: str | None = None,
    duration: float | None = None,
    data: dict[str, Scalar] | None = None,
) -> Record | None:
    """Record the entry of these fields (in ``Record``'s order) in ``sink`` now, from
    synchronous code, if it can be; else return its :class:`Record`, unrecorded, for
    the caller to await :func:`record` (or :func:`record_within`) with. Not a
    checkpoint. None when recorded.

    A sink offering ``record_fields_nowait`` (:class:`ledger.MemorySink`) is given
    the fields themselves: no ``Record`` is built on this path, the recorder's hot
    path (``data`` is given away: the caller must not change it afterwards). Any
    other sink gets the record :func:`ledger._record.record_of` builds, through
    :func:`record_sync` (``cancellable``) or :func:`record_now`. With
    ``cancellable`` (every entry but those of an end) a cancelled task records
    nothing here: the caller's await of :func:`record` then raises
    ``trio.Cancelled``; without it (the entries of an end, recorded even while the
    recorder is cancelled) there is no cancellation check. Either way the entry is
    returned, unrecorded, when the sink raised ``trio.WouldBlock``.

    Raises:
      AuditError: the sink raised, or ``data`` holds a key or value no record
        takes (the TypeError or ValueError of ``Record(...)`` chained), whatever
        the sink.
    """
    nowait = fields_nowait_of(sink)
    if nowait is not None and not (cancellable and cancelled()):
        try:
            nowait(
                kind, run_id, path, agent_id, tool, call_id, arguments, verdict,
                reason, result, error, duration, data,
            )
            return None
        except trio.WouldBlock:
            pass
        except Exception as exc:
            raise failed(sink, kind, exc) from exc
    try:
        entry = record_of(
            kind, run_id, path, agent_id, tool=tool, call_id=call_id, arguments=arguments,
            verdict=verdict, reason=reason, result=result, error=error, duration=duration,
            data=data,
        )
    except (TypeError, ValueError) as exc:
        # data the record refuses: the AuditError a MemorySink's refusal of it gives
        # (above), whatever the sink, as for any field the sink cannot encode.
        raise AuditError(
            f"the audit sink failed to record {kind!r}: {describe(exc)}"
        ) from exc
    if nowait is not None:
        return entry
    recorded = record_sync(sink, entry) if cancellable else record_now(sink, entry)
    return None if recorded else entry


def record_now(sink: Sink, entry: Record) -> bool:
    """Record ``entry`` in ``sink`` without waiting, if the sink can (its
    ``record_nowait``). Not a checkpoint, and no cancellation check: for the entries
    of an end, which are recorded even while the recorder is being cancelled.

    Returns False, having recorded nothing, when the sink has no ``record_nowait``
    or its ``record_nowait`` raised ``trio.WouldBlock``: the caller then awaits
    :func:`record` (or :func:`record_within`).

    Raises:
      AuditError: the sink raised (its exception chained).
    """
    nowait = nowait_of(sink)
    return nowait is not None and _nowait(sink, nowait, entry)


async def record(sink: Sink, entry: Record) -> None:
    """Record ``entry`` in ``sink``. A checkpoint when the sink's ``record`` is; with
    a sink offering ``record_nowait`` it only checks for cancellation (raising
    ``trio.Cancelled``, having recorded nothing, when cancelled) and does not yield.

    Raises:
      AuditError: the sink raised (its exception chained): the caller must not go
        on with the action the entry records.
    """
    nowait = nowait_of(sink)
    if nowait is not None:
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            nowait(entry)
            return
        except trio.WouldBlock:
            pass
        except Exception as exc:
            raise failed(sink, entry.kind, exc) from exc
    try:
        await sink.record(entry)
    except Exception as exc:
        raise failed(sink, entry.kind, exc) from exc


def overrun(kind: str, bound: float) -> AuditError:
    """The :class:`AuditError` of an entry of ``kind`` that the sink did not record
    within ``bound`` seconds (for a caller whose own scope bounds the wait)."""
    return AuditError(f"the audit sink did not record {kind!r} within {bound:g}s")


async def record_within(sink: Sink, entry: Record, bound: float, *, shield: bool = False) -> None:
    """:func:`record`, waiting at most ``bound`` seconds (shielded from outside
    cancellation with ``shield``, for an entry recorded while a task ends). A
    checkpoint, except with a sink offering ``record_nowait``: then no scope is
    entered, nothing waits, and it only checks for cancellation (unless ``shield``).

    Raises:
      AuditError: the sink raised, or did not answer in time (:func:`overrun`).
    """
    nowait = nowait_of(sink)
    if nowait is not None:
        if not shield:
            await trio.lowlevel.checkpoint_if_cancelled()
        if _nowait(sink, nowait, entry):
            return
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
