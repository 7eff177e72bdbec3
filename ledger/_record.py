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

from ._entry import Record, Scalar, freeze_data

_EMPTY = Record("x").data  # the shared empty mapping of a Record without data

_new = object.__new__
# The slots' own setters: a frozen attrs class refuses setattr, its slots do not.
_slots = Record.__dict__
_set_kind = _slots["kind"].__set__
_set_run_id = _slots["run_id"].__set__
_set_path = _slots["path"].__set__
_set_agent_id = _slots["agent_id"].__set__
_set_tool = _slots["tool"].__set__
_set_call_id = _slots["call_id"].__set__
_set_arguments = _slots["arguments"].__set__
_set_verdict = _slots["verdict"].__set__
_set_reason = _slots["reason"].__set__
_set_result = _slots["result"].__set__
_set_error = _slots["error"].__set__
_set_duration = _slots["duration"].__set__
_set_data = _slots["data"].__set__


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
    return types.MappingProxyType(data)


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
    record: Record = _new(Record)
    _set_kind(record, kind)
    _set_run_id(record, run_id)
    _set_path(record, path if type(path) is tuple else tuple(path))
    _set_agent_id(record, agent_id)
    _set_tool(record, tool)
    _set_call_id(record, call_id)
    _set_arguments(record, arguments)
    _set_verdict(record, verdict)
    _set_reason(record, reason)
    _set_result(record, result)
    _set_error(record, error)
    _set_duration(record, duration)
    _set_data(record, _owned_data(data) if data else _EMPTY)
    return record
