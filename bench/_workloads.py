"""The workloads W1-W5: each for subagent and for a hand-written bare-trio equivalent.

Every ``wN_*(size)`` function returns the async function of one repetition, for
:func:`bench._timing.compare` to time in fresh ``trio.run`` calls. It returns
its operation count; the W3 ones return ``(count, seconds)`` and time the
cancellation themselves.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Callable

import attrs
import trio
import trio.testing

import subagent
from agentcore import (
    FINAL_RESULT,
    FunctionTool,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    Usage,
    tool,
)
from ledger import JsonlSink, MemorySink, Sink, SqliteSink

from ._timing import Body, Latency

# -- shared pieces ---------------------------------------------------------------------


async def echo(arguments: str) -> str:
    """The trivial async echo tool."""
    return arguments


ECHO = FunctionTool("echo", "Echo the arguments.", {"type": "object"}, echo, read_only=True)
CALL_ECHO = Message("assistant", "", tool_calls=(ToolCall("c1", "echo", '{"x": 1}'),))
FINAL = Message("assistant", "done")


class TwoStepModel:
    """A model that yields once per call: first a tool call, then the final text."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await trio.lowlevel.checkpoint()
        if request.messages[-1].role == "user":
            return ModelResponse(CALL_ECHO, "tool_calls", Usage(10, 5))
        return ModelResponse(FINAL, "stop", Usage(10, 5))


class Counter:
    """Counts the events a consumer task takes from a stream or channel."""

    def __init__(self) -> None:
        self.seen = 0

    async def consume(self, events: AsyncIterable[object]) -> None:
        async for _ in events:
            self.seen += 1


class BlockingModel:
    """A model whose every call blocks until cancelled."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


# -- W1 fan-out ----------------------------------------------------------------------


#: Audit entries a W1 run records (task queued, started, finished; prompt, two
#: model responses, tool request, gate decision, tool result, run end).
W1_ENTRIES = 10


def w1_pool(
    runs: int,
    *,
    audit: bool = True,
    read: bool = False,
    otel: bool = False,
    sink: Callable[[], Sink] | None = None,
) -> Body:
    """W1 on the pool; ``audit=False`` runs it without an audit sink (the ablation
    the audit's cost is measured against); ``read=True`` reads the sink's entries
    at the end, so that the time includes building the chain (a
    :class:`~ledger.MemorySink` chains on read); ``otel=True`` traces the pool
    (:func:`subagent.otel.instrument`, the SDK with a ``BatchSpanProcessor`` and an
    exporter that discards), needing ``opentelemetry-sdk``. ``sink`` makes the
    audit sink of each repetition instead of a ``MemorySink`` (closed at the end,
    its ``statistics().recorded`` checked: every entry acknowledged)."""

    async def main() -> int:
        stream: subagent.Stream = subagent.Stream(64)
        counter = Counter()
        audit_sink = sink() if sink is not None else MemorySink() if audit else None

        async with trio.open_nursery() as nursery:
            nursery.start_soon(counter.consume, stream)
            async with subagent.open_pool(
                max_concurrent=8,
                max_queued=runs,
                events=stream,
                defaults=subagent.Defaults(model=TwoStepModel(), audit=audit_sink),
            ) as pool:
                pool.register(subagent.Spec("worker", tools=(ECHO,)))
                tracing = _traced(pool) if otel else None
                for i in range(runs):
                    await pool.submit("worker", f"task {i}")
            stats = pool.statistics()
            assert stats.finished == runs, stats
            stream.close()
        if tracing is not None:
            tracing()
        assert counter.seen >= runs * 6
        if read:
            assert isinstance(audit_sink, MemorySink)
            assert len(audit_sink.entries) == runs * W1_ENTRIES
        if isinstance(audit_sink, JsonlSink | SqliteSink):
            await audit_sink.aclose()
            assert audit_sink.statistics().recorded == runs * W1_ENTRIES
        return runs

    return main


def _traced(pool: subagent.Pool) -> Callable[[], None]:
    # Instrument ``pool``; returns what checks and shuts the tracing down at the end.
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from subagent.otel import instrument

    class Discard(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    handle = instrument(pool, tracer_provider=provider)

    def finish() -> None:
        stats = handle.statistics()
        assert stats.spans_dropped == stats.observer_errors == stats.open_spans == 0, stats
        provider.shutdown()

    return finish


@tool(name="echo", read_only=True)
async def typed_echo(x: int) -> int:
    """Echo the argument."""
    return x


@attrs.frozen
class Answer:
    """W1-typed's answer."""

    text: str
    count: int


CALL_TYPED_FINAL = Message(
    "assistant", "", tool_calls=(ToolCall("c2", FINAL_RESULT, '{"text": "done", "count": 1}'),)
)


class TypedTwoStepModel:
    """W1-typed's model: a call of the typed tool, then the typed answer."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await trio.lowlevel.checkpoint()
        if request.messages[-1].role == "user":
            return ModelResponse(CALL_ECHO, "tool_calls", Usage(10, 5))
        return ModelResponse(CALL_TYPED_FINAL, "tool_calls", Usage(10, 5))


#: Audit entries a W1-typed run records: W1's, plus its answer's output_validation.
W1_TYPED_ENTRIES = W1_ENTRIES + 1


def w1_typed_pool(runs: int, *, read: bool = False) -> Body:
    """W1 with a ``@tool`` echo and typed output (``Spec(output_type=Answer)``): the
    second model call answers through ``final_result``; audited, events streamed
    (``read=True`` checks the entries at the end, as :func:`w1_pool`)."""

    async def main() -> int:
        stream: subagent.Stream = subagent.Stream(64)
        counter = Counter()
        sink = MemorySink()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(counter.consume, stream)
            async with subagent.open_pool(
                max_concurrent=8,
                max_queued=runs,
                events=stream,
                defaults=subagent.Defaults(model=TypedTwoStepModel(), audit=sink),
            ) as pool:
                pool.register(
                    subagent.Spec("worker", tools=(typed_echo,), output_type=Answer)
                )
                tasks = [await pool.submit("worker", f"task {i}") for i in range(runs)]
            stats = pool.statistics()
            assert stats.finished == runs, stats
            stream.close()
        assert counter.seen >= runs * 6
        assert (await tasks[-1].wait()).structured == Answer("done", 1)
        if read:
            assert len(sink.entries) == runs * W1_TYPED_ENTRIES
        return runs

    return main


def w1_bare(runs: int) -> Body:
    async def main() -> int:
        send, receive = trio.open_memory_channel[tuple[str, int]](64)
        limiter = trio.CapacityLimiter(8)
        counter = Counter()

        async def one(i: int) -> None:
            async with limiter:
                await send.send(("start", i))
                await trio.lowlevel.checkpoint()  # model call 1
                await send.send(("response", i))
                await send.send(("tool_start", i))
                await echo('{"x": 1}')
                await send.send(("tool_end", i))
                await trio.lowlevel.checkpoint()  # model call 2
                await send.send(("response", i))
                await send.send(("end", i))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(counter.consume, receive)
            async with trio.open_nursery() as runners:
                for i in range(runs):
                    runners.start_soon(one, i)
            await send.aclose()
        assert counter.seen == runs * 6
        return runs

    return main


# -- W2 stream throughput ---------------------------------------------------------------


def w2_stream(events: int) -> Body:
    async def main() -> int:
        stream: subagent.Stream = subagent.Stream(64)
        counter = Counter()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(counter.consume, stream)
            for i in range(events):
                await stream.send(i)  # type: ignore[arg-type]
            stream.close()
        assert counter.seen == events
        return events

    return main


def w2_channel(events: int) -> Body:
    async def main() -> int:
        send, receive = trio.open_memory_channel[int](64)
        counter = Counter()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(counter.consume, receive)
            async with send:
                for i in range(events):
                    await send.send(i)
        assert counter.seen == events
        return events

    return main


def w2_channel_nowait(events: int) -> Body:
    async def main() -> int:
        send, receive = trio.open_memory_channel[int](64)
        seen = 0

        async def consume() -> None:
            nonlocal seen
            while True:
                try:
                    receive.receive_nowait()
                except trio.WouldBlock:
                    try:
                        await receive.receive()
                    except trio.EndOfChannel:
                        return
                except trio.EndOfChannel:
                    return
                seen += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            async with send:
                for i in range(events):
                    try:
                        send.send_nowait(i)
                    except trio.WouldBlock:
                        await send.send(i)
        assert seen == events
        return events

    return main


# -- W3 cancel latency --------------------------------------------------------------------


#: Called around the timed part of a W3 repetition (``bench.w3_profile`` measures
#: CPU time, a profile or instructions there): before the cancel, after the exit.
Hooks = tuple[Callable[[], None], Callable[[], None]]


def _nothing() -> None:
    pass


NO_HOOKS: Hooks = (_nothing, _nothing)


def w3_pool(runs: int, hooks: Hooks = NO_HOOKS) -> Latency:
    begin, end = hooks

    async def main() -> tuple[int, float]:
        async with subagent.open_pool(
            max_concurrent=runs, max_queued=runs,
            defaults=subagent.Defaults(model=BlockingModel()),
        ) as pool:
            pool.register(subagent.Spec("blocked", idle_timeout=None))
            for i in range(runs):
                await pool.submit("blocked", f"task {i}")
            await trio.testing.wait_all_tasks_blocked()
            assert pool.statistics().running == runs
            begin()
            start = time.perf_counter()
            pool.cancel()
        elapsed = time.perf_counter() - start
        end()
        assert pool.statistics().cancelled == runs
        return runs, elapsed

    return main


def w3_bare(runs: int, hooks: Hooks = NO_HOOKS) -> Latency:
    begin, end = hooks

    async def main() -> tuple[int, float]:
        model = BlockingModel()
        request = ModelRequest((Message("user", "x"),))
        async with trio.open_nursery() as nursery:
            for _ in range(runs):
                nursery.start_soon(model.complete, request)
            await trio.testing.wait_all_tasks_blocked()
            begin()
            start = time.perf_counter()
            nursery.cancel_scope.cancel()
        elapsed = time.perf_counter() - start
        end()
        return runs, elapsed

    return main


# -- W5 nesting ---------------------------------------------------------------------------


class DelegatingModel:
    """Top level: delegate to two children in one turn, then answer; children answer."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await trio.lowlevel.checkpoint()
        last = request.messages[-1]
        if last.role == "user" and request.tools:
            calls = tuple(
                ToolCall(f"d{k}", "subagent", f'{{"agent": "child", "task": "part {k}"}}')
                for k in range(2)
            )
            return ModelResponse(Message("assistant", "", tool_calls=calls), "tool_calls")
        return ModelResponse(FINAL, "stop", Usage(10, 5))


def w5_pool(runs: int) -> Body:
    async def main() -> int:
        async with subagent.open_pool(
            max_concurrent=8, max_queued=runs, max_depth=2,
            defaults=subagent.Defaults(model=DelegatingModel(), audit=MemorySink()),
        ) as pool:
            pool.register(subagent.Spec("child"))
            pool.register(subagent.Spec("top", tools=(subagent.SubagentTool(pool),)))
            for i in range(runs):
                await pool.submit("top", f"task {i}")
        assert pool.statistics().finished == runs * 3, pool.statistics()
        return runs

    return main


def w5_bare(runs: int) -> Body:
    async def main() -> int:
        limiter = trio.CapacityLimiter(8)
        send, receive = trio.open_memory_channel[tuple[str, int]](64)

        async def drain() -> None:
            async for _ in receive:
                pass

        async def child(i: int) -> None:
            async with limiter:
                await send.send(("start", i))
                await trio.lowlevel.checkpoint()
                await send.send(("end", i))

        async def top(i: int) -> None:
            async with limiter:
                await send.send(("start", i))
                await trio.lowlevel.checkpoint()
            async with trio.open_nursery() as children:
                children.start_soon(child, i)
                children.start_soon(child, i)
            async with limiter:
                await trio.lowlevel.checkpoint()
                await send.send(("end", i))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            async with trio.open_nursery() as tops:
                for i in range(runs):
                    tops.start_soon(top, i)
            await send.aclose()
        return runs

    return main
