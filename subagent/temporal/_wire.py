"""The wire form of events: a subagent :class:`~subagent.Event` as JSON bytes and back.

Events cross the workflow boundary (activity -> workflow signal -> query -> caller)
as JSON text, so what a caller decodes came from outside its process: decoding is
size-capped (:data:`MAX_EVENT_BYTES`) and every failure is an :class:`EventDecodeError`.
Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

import msgspec

import agentcore

from .._events import Event, EventKind, LoopStall
from ._errors import EventDecodeError

#: The largest encoded event accepted (1 MiB); a bigger one is refused.
MAX_EVENT_BYTES = 1024 * 1024

_ENCODER = msgspec.json.Encoder()
_RUN_KINDS = {k.value: k for k in agentcore.EventKind}
_POOL_KINDS = {k.value: k for k in EventKind}


def _kind(value: object) -> agentcore.EventKind | EventKind:
    if isinstance(value, str):
        if value in _RUN_KINDS:
            return _RUN_KINDS[value]
        if value in _POOL_KINDS:
            return _POOL_KINDS[value]
    raise EventDecodeError(f"unknown event kind {str(value)[:40]!r}")


def encode_event(event: Event) -> str:
    """``event`` as JSON text (the form the workflow stores). Not a checkpoint."""
    return _ENCODER.encode(event).decode("utf-8")


def _path(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise EventDecodeError(f"event field {what!r} is not a list of strings")
    return tuple(value)


def decode_event(text: str) -> Event:
    """An :class:`~subagent.Event` from :func:`encode_event`'s text. Not a checkpoint.

    Raises:
      EventDecodeError: the text is larger than :data:`MAX_EVENT_BYTES`, is not JSON,
        or does not describe an event.
    """
    if len(text) > MAX_EVENT_BYTES:
        raise EventDecodeError(f"an event of {len(text)} characters exceeds {MAX_EVENT_BYTES}")
    try:
        raw = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise EventDecodeError(f"an event is not valid JSON: {exc}") from None
    except RecursionError:
        raise EventDecodeError("an event is not valid JSON: nested too deeply") from None
    if not isinstance(raw, dict):
        raise EventDecodeError("an event is not a JSON object")
    try:
        fields: dict[str, Any] = {
            "path": _path(raw.get("path"), "path"),
            "kind": _kind(raw.get("kind")),
        }
        inner = raw.get("event")
        if inner is not None:
            if not isinstance(inner, dict):
                raise EventDecodeError("event field 'event' is not an object")
            inner = dict(inner, kind=_kind(inner.get("kind")))
            fields["event"] = msgspec.convert(inner, agentcore.Event, strict=False)
        for name in ("call_id", "error", "output"):
            fields[name] = msgspec.convert(raw.get(name), str | None)
        if raw.get("time") is not None:  # when it happened, not when it was decoded
            fields["time"] = msgspec.convert(raw["time"], float)
        if raw.get("child") is not None:
            fields["child"] = _path(raw["child"], "child")
        if raw.get("summary") is not None:
            fields["summary"] = msgspec.convert(raw["summary"], agentcore.RunSummary)
        if raw.get("tree_usage") is not None:
            fields["tree_usage"] = msgspec.convert(raw["tree_usage"], agentcore.Usage)
        if raw.get("stall") is not None:
            stall = dict(raw["stall"])
            stall["path"] = _path(stall.get("path"), "stall.path")
            fields["stall"] = msgspec.convert(stall, LoopStall)
        return Event(**fields)
    except msgspec.ValidationError as exc:
        raise EventDecodeError(f"an event does not fit its fields: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise EventDecodeError(f"an event does not fit its fields: {exc}") from None
