"""What the agentcore tests share: an ``emit`` that keeps a run's events."""

from __future__ import annotations

from agentcore import Event, EventKind


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
