"""Fault injection: wrappers that make a model, a tool, an audit sink or a stream
consumer raise, hang or be cancelled at chosen calls."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping
from typing import Any

import trio

import ledger
from agentcore import Liveness, ModelError, ModelRequest, ModelResponse
from subagent._current import current_task


class Fault(enum.StrEnum):
    """What an injected fault does to the call it hits."""

    raise_ = "raise"
    """The call raises (a ModelError, RuntimeError or OSError, as fits the wrapper)."""
    hang = "hang"
    """The call never returns (until cancelled)."""
    cancel = "cancel"
    """The pool task making the call is cancelled there."""


class Injected(Exception):
    """The exception an injected ``raise`` fault raises where no documented error fits."""


#: Faults injected so far, by wrapper and fault, over the whole test session.
INJECTED: Counter[str] = Counter()


class Plan:
    """Which call of one wrapper gets which fault (calls counted from 0)."""

    def __init__(self, name: str, faults: Mapping[int, Fault]) -> None:
        self.name = name
        self.faults = dict(faults)
        self.calls = 0

    async def hit(self, exception: BaseException) -> None:
        """Apply the fault planned for this call, if any. A checkpoint when one hits."""
        fault = self.faults.get(self.calls)
        self.calls += 1
        if fault is None:
            return
        INJECTED[f"{self.name} {fault}"] += 1
        if fault is Fault.raise_:
            raise exception
        if fault is Fault.hang:
            await trio.sleep_forever()
        task = current_task.get()
        if task is not None:
            task.cancel()
        await trio.lowlevel.checkpoint()


class FaultyModel:
    """A model whose planned calls fail; the others go to ``inner``."""

    def __init__(self, inner: Any, plan: Plan) -> None:
        self.inner = inner
        self.plan = plan

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await self.plan.hit(ModelError("injected model failure"))
        response: ModelResponse = await self.inner.complete(request)
        return response


class FaultyTool:
    """A tool whose planned calls fail; the others go to ``inner`` (declared opaque)."""

    def __init__(self, inner: Any, plan: Plan) -> None:
        self.inner = inner
        self.plan = plan
        self.name = inner.name
        self.description = inner.description
        self.read_only = getattr(inner, "read_only", False)
        # Opaque: a wrapper that may hang is bounded by the agent's tool_timeout.
        self.liveness = Liveness.opaque

    @property
    def parameters(self) -> Mapping[str, Any]:
        params: Mapping[str, Any] = self.inner.parameters
        return params

    async def execute(self, arguments: str) -> str:
        await self.plan.hit(Injected("injected tool failure"))
        result: str = await self.inner.execute(arguments)
        return result


class FaultySink:
    """An audit sink whose planned records fail; the others go to a MemorySink."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.inner = ledger.MemorySink()

    async def record(self, record: ledger.Record) -> None:
        await self.plan.hit(OSError(28, "No space left on device"))
        await self.inner.record(record)

    async def aclose(self) -> None:
        await self.inner.aclose()
