"""An audit sink that fails on purpose, for the fail-closed tests of every layer."""

from __future__ import annotations

import trio

import ledger

#: How the sink's failure reads in error messages.
DISK_FULL = "OSError: [Errno 28] No space left on device"


class FailingSink:
    """A MemorySink that raises (or, with ``hang``, never answers) on entries of one
    kind (of the given calls, if any)."""

    def __init__(self, kind: str, call_ids: tuple[str, ...] = (), *, hang: bool = False) -> None:
        self.kind = kind
        self.call_ids = call_ids
        self.hang = hang
        self.inner = ledger.MemorySink()

    async def record(self, record: ledger.Record) -> None:
        if record.kind == self.kind and (not self.call_ids or record.call_id in self.call_ids):
            if self.hang:
                await trio.sleep_forever()
            raise OSError(28, "No space left on device")
        await self.inner.record(record)

    async def aclose(self) -> None:
        await self.inner.aclose()

    @property
    def kinds(self) -> list[str]:
        return [str(e.kind) for e in self.inner.entries]


class FieldsFailingSink(FailingSink):
    """A FailingSink that also takes entries as their fields, synchronously (the path
    a run's entries take into a :class:`ledger.MemorySink`), failing the same entries
    there; a hanging one is left to ``record`` (``trio.WouldBlock``). Counts the entries
    taken as fields."""

    def __init__(self, kind: str, call_ids: tuple[str, ...] = (), *, hang: bool = False) -> None:
        super().__init__(kind, call_ids, hang=hang)
        self.taken = 0

    def record_fields_nowait(self, kind: str, run_id: str, path: tuple[str, ...],
                             agent_id: str, tool: str | None, call_id: str | None,
                             *rest: object) -> None:
        if kind == self.kind and (not self.call_ids or call_id in self.call_ids):
            if self.hang:
                raise trio.WouldBlock
            raise OSError(28, "No space left on device")
        self.inner.record_fields_nowait(
            kind, run_id, path, agent_id, tool, call_id, *rest  # type: ignore[arg-type]
        )
        self.taken += 1
