"""Redaction off the event loop for large records (the async shell of ``_redact``)."""

from __future__ import annotations

from typing import Final

import trio

from ._entry import Record
from ._redact import redact_record

OFFLOAD_CHARS: Final = 64 * 1024
"""Records whose texts hold more characters than this are redacted in a worker
thread; smaller ones inline (a thread hop costs more than their redaction)."""


def is_large(record: Record) -> bool:
    """Whether ``record`` holds more than :data:`OFFLOAD_CHARS` characters of text.

    Counts only fields that are str (a str subclass by the length of the str it
    holds, not by its own ``__len__``): a field of another type is refused by
    redaction (:func:`ledger.redact_record`) with the encoder's error, not here.
    """
    r = record
    size = 0
    for text in (r.arguments, r.result, r.error, r.reason, r.tool, r.call_id):
        if type(text) is str:
            size += len(text)
        elif isinstance(text, str):
            size += str.__len__(text)
    if r.data and size <= OFFLOAD_CHARS:
        size += sum(len(v) for v in r.data.values() if type(v) is str)
    return size > OFFLOAD_CHARS


async def redact_in_thread(record: Record) -> Record:
    """Return ``record`` redacted (:func:`ledger.redact_record`) by a worker thread.

    For records where :func:`is_large` holds, so that recording a large tool
    result never stalls the other tasks. A checkpoint (the redaction itself is
    not cancelled once it started: it is O(n) and short).
    """
    return await trio.to_thread.run_sync(redact_record, record)
