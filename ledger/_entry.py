"""The entry model: what a recorder hands a sink, and what a sink records."""

from __future__ import annotations

import enum
import math
import types
from collections.abc import Iterable, Mapping
from typing import TypeAlias

import attrs

Scalar: TypeAlias = str | int | float | bool | None
"""A value allowed in an entry's ``data``."""

_EMPTY: Mapping[str, Scalar] = types.MappingProxyType({})


_SCALARS = (str, int, float, bool, type(None))


def freeze_data(data: Mapping[str, Scalar]) -> Mapping[str, Scalar]:
    """Return a read-only copy of ``data`` (the shared empty mapping when empty).

    Keys and values of a subclass of str, int or float are copied as the value
    they hold, of the exact type (redaction and the encoder never call a
    method of theirs).

    Raises:
      TypeError: A key is not a str or a value is not str, int, float, bool or None.
      ValueError: A float value is not finite (JSON cannot hold it), or two keys
        are equal as str (keys of a str subclass whose ``__eq__`` says otherwise).
    """
    if not data:
        return _EMPTY
    copy = dict(data)
    # The common case in exact types first (every entry of a run holds a few str
    # and int values); anything else takes the checks below, which say what is wrong.
    for key, value in copy.items():
        kind = type(value)
        if type(key) is not str or not (
            kind is str or kind is int or value is None or kind is bool
            or (kind is float and math.isfinite(value))  # type: ignore[arg-type]
        ):
            break
    else:
        return types.MappingProxyType(copy)
    exact: dict[str, Scalar] = {}
    for key, value in copy.items():
        if not isinstance(key, str):
            raise TypeError(f"entry data keys must be str, not {type(key).__name__}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"entry data value for {key!r} must be finite, not {value!r}")
        if not isinstance(value, _SCALARS):
            raise TypeError(
                f"entry data value for {key!r} must be str, int, float, bool or None,"
                f" not {type(value).__name__}"
            )
        # A subclass of str, int or float is kept as the value it holds, of the exact
        # type: redaction, key order and the encoder then read that value, never a
        # method the subclass overrides (a lower() or __lt__ of its own, a bit_length
        # that hides an int too wide to spell).
        name = str.__str__(key)
        if name in exact:
            raise ValueError(f"entry data holds two keys equal to {name!r}")
        exact[name] = _exact_scalar(value)
    return types.MappingProxyType(exact)


def _exact_scalar(value: Scalar) -> Scalar:
    # value as its exact type (the copy a subclass's own slot makes, not its methods).
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int.__int__(value)
    return float.__float__(value)


def _empty_data() -> Mapping[str, Scalar]:
    return _EMPTY


def _to_path(path: Iterable[str]) -> tuple[str, ...]:
    return path if type(path) is tuple else tuple(path)


class EntryKind(enum.StrEnum):
    """The kinds of audit entry the library records (any non-empty str is accepted)."""

    prompt = "prompt"
    """The input a run starts from."""
    model_response = "model_response"
    """An answer of the model."""
    tool_request = "tool_request"
    """The model asked for a tool call."""
    gate_decision = "gate_decision"
    """The tool gate allowed or denied a call."""
    tool_result = "tool_result"
    """A tool call's result or error."""
    output_validation = "output_validation"
    """An attempt at a run's typed output (``final_result`` or a text answer):
    ``verdict`` ok or error."""
    abort = "abort"
    """A run was aborted; ``error`` says why (the run's abort reason, or its cancel:
    for a pool's task, who cancelled it, as ``cancelled (<cause>): <words>`` with the
    cause its ``task_cancelled`` entry names)."""
    run_end = "run_end"
    """A run ended."""
    error = "error"
    """A run failed."""
    task_queued = "task_queued"
    """The pool accepted a task."""
    task_started = "task_started"
    """A task's run started."""
    task_finished = "task_finished"
    """A task's run ended."""
    task_cancelled = "task_cancelled"
    """A task was cancelled. ``data["cause"]`` says who cancelled it, one of:
    ``caller`` (``Task.cancel()`` of it or of a task above it: the caller's, the
    HTTP cancel of ``subagent serve``, the ``subagent mcp`` server's on its client's
    cancel),
    ``timeout`` (a time limit above it: the ``timeout`` or ``idle_timeout`` of the task
    whose run delegated it, or that call's ``tool_timeout``), ``parent_ended`` (its
    parent's run ended or stopped waiting for it: a background child that is not
    critical, a child of an aborted run), ``pool_closed`` (``Pool.cancel()``, the block
    of ``open_pool`` raised or was cancelled, a cancel from outside the pool, the
    ``subagent mcp`` server's calls in flight when its client closes stdin),
    ``interrupt`` (Ctrl-C or SIGTERM: a ``KeyboardInterrupt`` out of ``open_pool``'s
    block), ``budget`` (a budget over it was spent), ``temporal`` (Temporal cancelled
    the activity running its tree). The first cancel to reach a task names it; the
    tasks below it the same cancel reaches get the same cause. Entries written before
    the field existed have no ``cause``."""
    task_orphaned = "task_orphaned"
    """A background result arrived after its parent ended."""
    result_delivered = "result_delivered"
    """A background result was delivered to its parent run."""


@attrs.frozen(slots=True)
class Record:
    """The content of one audit entry, as a recorder hands it to a sink.

    A sink redacts it, numbers it and chains it into an :class:`Entry`.
    ``path`` is the full AgentPath of the run; ``data`` holds small extras
    (end reason, turns, tokens, ...) and is copied read-only.
    """

    kind: str
    run_id: str = ""
    path: tuple[str, ...] = attrs.field(default=(), converter=_to_path)
    agent_id: str = ""
    tool: str | None = None
    call_id: str | None = None
    arguments: str | None = None
    verdict: str | None = None
    reason: str | None = None
    result: str | None = None
    error: str | None = None
    duration: float | None = None
    data: Mapping[str, Scalar] = attrs.field(factory=_empty_data, converter=freeze_data)


@attrs.frozen(slots=True)
class Entry:
    """One recorded, chained audit entry.

    ``seq`` numbers entries from 1 without gaps; ``time`` is UTC ISO-8601
    ending in ``Z``; ``prev_hash`` is the hash of the previous entry (64
    zeros for the first); ``hash`` is the hex SHA-256 of the canonical
    encoding of every other field (see :func:`ledger.canonical_encoding`).
    The other fields are the :class:`Record`'s, after redaction.
    """

    seq: int
    time: str
    kind: str
    run_id: str
    path: tuple[str, ...]
    agent_id: str
    tool: str | None
    call_id: str | None
    arguments: str | None
    verdict: str | None
    reason: str | None
    result: str | None
    error: str | None
    duration: float | None
    data: Mapping[str, Scalar]
    prev_hash: str
    hash: str
