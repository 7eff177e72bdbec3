"""Building a :class:`Record` on a recorder's hot path, without its converters.

``Record(...)`` copies ``path`` to a tuple and ``data`` to a read-only mapping
(checking every value) through attrs converters, field by field: right for a
record built from outside values, and about a third of an audit entry's cost
in a run that records ten of them. :func:`record_of` builds the same record
for the library's own recorders (``agentcore``'s audit path), each field set
once: ``path`` kept when it is already a tuple, ``data`` checked as ``Record``
checks it and wrapped read-only without a copy (the caller gives its dict
away). A value of an unusual type takes ``Record``'s own converters, so the
errors are the same as ``Record(...)``'s. Not public API: outside the library,
build records with ``Record(...)``.
"""

from __future__ import annotations

import math
import types
from collections.abc import Iterable, Mapping
from typing import Any

from ._entry import Record, Scalar, freeze_data

_EMPTY = Record("x").data  # the shared empty mapping of a Record without data

_new = object.__new__
_proxy = types.MappingProxyType


class _Open(Record):
    """A :class:`Record` under construction: the same slots (it adds none), set by
    plain attribute stores. :func:`record_of` fills one and turns it into a
    ``Record`` (``__class__`` assignment, allowed since the layouts are the same),
    so no instance of this class is ever seen outside :func:`record_of`.

    Both ``__setattr__`` and ``__delattr__`` are ``object``'s own, so that the
    type's attribute setter is the generic one and a store into a slot is a plain
    slot store (with a Python ``__delattr__`` left from ``Record``, every store
    would go through a Python-level lookup).
    """

    __slots__ = ()
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__


def _owned_data(data: dict[str, Scalar]) -> Mapping[str, Scalar]:
    # freeze_data without the copy when every key and value has its common exact
    # type; anything else goes through freeze_data (its errors, its copy).
    for key, value in data.items():
        kind = type(value)
        if type(key) is not str or not (
            kind is str or kind is int or value is None or kind is bool
            or (kind is float and math.isfinite(value))  # type: ignore[arg-type]
        ):
            return freeze_data(data)
    return _proxy(data)


def record_of(
    kind: str,
    run_id: str,
    path: Iterable[str],
    agent_id: str,
    *,
    tool: str | None = None,
    call_id: str | None = None,
    arguments: str | None = None,
    verdict: str | None = None,
    reason: str | None = None,
    result: str | None = None,
    error: str | None = None,
    duration: float | None = None,
    data: dict[str, Scalar] | None = None,
) -> Record:
    """The :class:`Record` ``Record(kind, run_id, path, agent_id, ...)`` would build,
    equal to it field for field, built without the attrs converters.

    ``data`` is taken over, not copied: the caller must not change the dict
    afterwards (the record holds it behind a read-only view). Not a checkpoint.

    Raises:
      TypeError, ValueError: as ``Record(...)``, for a ``data`` key or value it refuses.
    """
    record: Any = _new(_Open)  # a Record once its class is set below
    record.kind = kind
    record.run_id = run_id
    record.path = path if type(path) is tuple else tuple(path)
    record.agent_id = agent_id
    record.tool = tool
    record.call_id = call_id
    record.arguments = arguments
    record.verdict = verdict
    record.reason = reason
    record.result = result
    record.error = error
    record.duration = duration
    record.data = _owned_data(data) if data else _EMPTY
    record.__class__ = Record
    return record  # type: ignore[no-any-return]


def record_from_fields(
    kind: str,
    run_id: str,
    path: tuple[str, ...],
    agent_id: str,
    tool: str | None,
    call_id: str | None,
    arguments: str | None,
    verdict: str | None,
    reason: str | None,
    result: str | None,
    error: str | None,
    duration: float | None,
    data: Mapping[str, Scalar] | None,
) -> Record:
    """The :class:`Record` of these fields, in ``Record``'s order, taken from a
    record (a sink keeps its pending records as their fields): ``path`` a tuple
    of str, ``data`` that record's read-only mapping, a checked dict given away
    (wrapped read-only here), or ``None`` for none. Not a checkpoint.
    """
    record: Any = _new(_Open)  # a Record once its class is set below
    record.kind = kind
    record.run_id = run_id
    record.path = path
    record.agent_id = agent_id
    record.tool = tool
    record.call_id = call_id
    record.arguments = arguments
    record.verdict = verdict
    record.reason = reason
    record.result = result
    record.error = error
    record.duration = duration
    record.data = _EMPTY if not data else _proxy(data) if type(data) is dict else data
    record.__class__ = Record
    return record  # type: ignore[no-any-return]
