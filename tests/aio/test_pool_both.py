"""The pool's acceptance behaviours (bounds, the bounded queue, backpressure,
delegation, cancellation, audit, exceptions) as one scenario each, run from trio
and from asyncio through ``subagent.aio`` (issue 37): the same assertions hold."""

from __future__ import annotations

import json
from typing import Any

import pytest

import subagent
from agentcore import Message, ModelRequest, ModelResponse
from agentcore.testing import ScriptedModel, tool_call_reply
from ledger import MemorySink
from subagent import Defaults, Spec, SubagentTool, TaskCancelled, TaskStatus

from ._drivers import DRIVERS, Driver, GateModel

pytestmark = pytest.mark.parametrize("driver", DRIVERS, ids=lambda d: d.name)


def test_max_concurrent_and_the_queue_bound_hold(driver: Driver) -> None:
    model = GateModel()

    async def scenario(d: Driver) -> None:
        async with d.open_pool(max_concurrent=2, max_queued=3,
                               defaults=Defaults(model=model)) as pool:
            pool.register(Spec(name="w", description="works"))
            tasks = [await pool.submit("w", f"t{i}") for i in range(5)]
            async with d.group() as group:
                group.start_soon(pool.submit, "w", "t5")  # the queue (3) is full
                await d.settle()
                stats = pool.statistics()
                assert (stats.running, stats.queued, stats.waiting_submitters) == (2, 3, 1)
                assert model.active == 2
                d.sync(model.release)
            results = [await task.wait() for task in tasks]
        assert [r.output for r in results] == [f"done t{i}" for i in range(5)]
        assert model.max_active == 2
        assert model.calls == 6
        stats = pool.statistics()
        assert (stats.finished, stats.accepted, stats.running, stats.queued) == (6, 6, 0, 0)

    driver.run(scenario)


def test_a_reader_that_stops_reading_blocks_the_runs(driver: Driver) -> None:
    model = ScriptedModel(["one", "two"])

    async def scenario(d: Driver) -> None:
        events = d.stream(1)
        async with d.open_pool(max_concurrent=4, defaults=Defaults(model=model)) as pool:
            pool.register(Spec(name="w", description="works"))
            first = await pool.submit("w", "a", events=events)
            await d.settle()
            # task_queued fills the buffer, task_started goes to the reserve, and the
            # run's agent_start waits: the run never reaches its model.
            stats = events.statistics()
            assert (stats.buffered, stats.reserved, stats.waiting_senders) == (2, 1, 1)
            assert first.status is TaskStatus.running
            assert len(model.requests) == 0
            seen: list[Any] = []
            async with d.group() as group:
                async def read() -> None:
                    async for event in events:
                        seen.append(event)
                        if str(event.kind) == "task_finished":
                            return
                group.start_soon(read)
            assert (await first.wait()).output == "one"
        assert [str(e.kind) for e in seen][:3] == ["task_queued", "task_started", "agent_start"]
        assert {e.path for e in seen} == {first.path}
        assert events.statistics().dropped == 0

    driver.run(scenario)


class Delegating:
    """Lead delegates once to ``helper``, then answers with its result."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        me = request.messages[1].content
        if me == "lead task" and last.role == "user":
            call = json.dumps({"agent": "helper", "task": "help"})
            return ModelResponse(tool_call_reply("subagent", call, id="d1"))
        if last.role == "tool":
            return ModelResponse(Message("assistant", f"lead got: {last.content}"))
        return ModelResponse(Message("assistant", f"helped with {last.content}"))


def test_delegation_tags_events_with_paths_and_audits_them(driver: Driver) -> None:
    audit = MemorySink()

    async def scenario(d: Driver) -> None:
        events = d.stream(256)
        async with d.open_pool(defaults=Defaults(model=Delegating(), audit=audit),
                               events=events) as pool:
            tool = SubagentTool(pool.pool if hasattr(pool, "pool") else pool)
            pool.register(Spec(name="lead", description="leads", tools=[tool]))
            pool.register(Spec(name="helper", description="helps"))
            task = await pool.submit("lead", "lead task")
            result = await task.wait()
            assert "lead got:" in result.output and "helped with help" in result.output
            assert [child.path for child in task.children] == [("lead/0001", "helper/0002")]
        events.close()
        paths = {event.path async for event in events}
        assert paths == {("lead/0001",), ("lead/0001", "helper/0002")}
        kinds = [str(e.kind) for e in audit.entries]
        assert kinds == [
            "task_queued", "task_started", "prompt", "model_response", "tool_request",
            "gate_decision", "task_queued", "task_started", "prompt", "model_response",
            "run_end", "task_finished", "tool_result", "model_response", "run_end",
            "task_finished"]

    driver.run(scenario)


def test_cancel_ends_a_task_and_a_cancelled_wait_does_not(driver: Driver) -> None:
    model = GateModel()

    async def scenario(d: Driver) -> None:
        async with d.open_pool(defaults=Defaults(model=model)) as pool:
            pool.register(Spec(name="w", description="works"))
            kept = await pool.submit("w", "kept")
            dropped = await pool.submit("w", "dropped")
            await d.cancelled_wait(kept)
            assert kept.status is TaskStatus.running
            dropped.cancel()
            with pytest.raises(TaskCancelled):
                await dropped.wait()
            d.sync(model.release)
            assert (await kept.wait()).output == "done kept"
        stats = pool.statistics()
        assert (stats.finished, stats.cancelled) == (1, 1)

    driver.run(scenario)


class Boom(Exception):
    pass


def test_leaving_by_an_exception_cancels_every_task_and_reraises_it(driver: Driver) -> None:
    model = GateModel()
    seen: dict[str, Any] = {}

    async def scenario(d: Driver) -> None:
        with pytest.raises(Boom) as raised:
            async with d.open_pool(defaults=Defaults(model=model)) as pool:
                pool.register(Spec(name="w", description="works"))
                seen["tasks"] = [await pool.submit("w", f"t{i}") for i in range(3)]
                await d.settle()
                raise Boom("out")
        assert str(raised.value) == "out"
        seen["stats"] = pool.statistics()

    driver.run(scenario)
    assert [t.status for t in seen["tasks"]] == [TaskStatus.cancelled] * 3
    assert (seen["stats"].cancelled, seen["stats"].running) == (3, 0)


def test_errors_are_the_same_classes(driver: Driver) -> None:
    async def scenario(d: Driver) -> None:
        async with d.open_pool(defaults=Defaults(model=GateModel())) as pool:
            with pytest.raises(subagent.UnknownAgentError):
                await pool.submit("nobody", "x")
            pool.register(Spec(name="w", description="works"))
            with pytest.raises(subagent.SpecError):
                pool.register(Spec(name="a/b", description="bad name"))
        with pytest.raises(subagent.PoolClosedError):
            await pool.submit("w", "late")

    driver.run(scenario)
    with pytest.raises(ValueError, match="max_concurrent"):
        async def bad(d: Driver) -> None:
            async with d.open_pool(max_concurrent=0):
                pass

        driver.run(bad)
