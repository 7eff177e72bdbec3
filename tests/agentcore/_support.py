"""What the agentcore tests share: an ``emit`` that keeps a run's events, and what a
schema says of a default factory under the installed msgspec."""

from __future__ import annotations

from typing import Any

import msgspec

from agentcore import Event, EventKind

#: What the schema says of a field whose default is a factory (``attrs.Factory(list)``,
#: ``field(default_factory=list)``): msgspec 0.23 states the value it makes, as it did for
#: other defaults; 0.22 said nothing. Either is a correct schema; the floor stays 0.18.5.
LIST_FACTORY: dict[str, Any] = (
    {"default": []}
    if tuple(int(part) for part in msgspec.__version__.split(".")[:2]) >= (0, 23)
    else {}
)


class Recorder:
    """Collects a run's events."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def __call__(self, event: Event) -> None:
        self.events.append(event)

    @property
    def kinds(self) -> list[str]:
        return [str(e.kind) for e in self.events]

    def of(self, kind: EventKind) -> list[Event]:
        return [e for e in self.events if e.kind is kind]

    def texts(self, kind: EventKind) -> list[str]:
        return [e.text for e in self.of(kind)]
