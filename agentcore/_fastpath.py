"""Which synchronous fast paths of an audit sink the recorders may take.

A sink's ``record_nowait`` stands for its ``record``, and ``record_fields_nowait``
for both: the fast path is taken only when the class that defines it is the class
that defines each slower path it stands for, or a subclass of it. A subclass of
:class:`ledger.MemorySink` that overrides ``record`` (to forward, filter, or fail
closed on a full disk) therefore gets its ``record`` awaited for every entry, never
the inherited ``record_nowait``; one that overrides ``record_nowait`` gets that
called, never the inherited ``record_fields_nowait``. A method set on an instance,
not its class, counts as defined by no class.

The decision is made once per sink class and kept (a class is not expected to
change its methods after its first entry).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Per sink class: (record_nowait may be called, record_fields_nowait may be called).
_PATHS: dict[type, tuple[bool, bool]] = {}


def _owner(cls: type, name: str) -> type | None:
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass
    return None


def _below(fast: type | None, slow: type | None) -> bool:
    # Whether a method of ``fast`` accounts for one of ``slow``: defined at or below it.
    return slow is None or (fast is not None and issubclass(fast, slow))


def paths(cls: type) -> tuple[bool, bool]:
    """Whether instances of ``cls`` may take ``record_nowait`` and
    ``record_fields_nowait`` (see the module docstring). Pure, cached per class."""
    found = _PATHS.get(cls)
    if found is None:
        record = _owner(cls, "record")
        nowait = _owner(cls, "record_nowait")
        fields = _owner(cls, "record_fields_nowait")
        found = (
            nowait is not None and _below(nowait, record),
            fields is not None and _below(fields, record) and _below(fields, nowait),
        )
        _PATHS[cls] = found
    return found


def nowait_of(sink: Any) -> Callable[..., Any] | None:
    """The sink's ``record_nowait``, if the recorders may call it; else None. Not a
    checkpoint."""
    found = _PATHS.get(type(sink)) or paths(type(sink))
    return sink.record_nowait if found[0] else None


def fields_nowait_of(sink: Any) -> Callable[..., Any] | None:
    """The sink's ``record_fields_nowait``, if the recorders may call it; else None.
    Not a checkpoint."""
    found = _PATHS.get(type(sink)) or paths(type(sink))
    return sink.record_fields_nowait if found[1] else None
