"""The Pool (SPEC 3.2, 3.3): the Go package's checklist and the flaws it fixes."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from agentcore import EndReason, ModelError, ModelRequest, RunSummary
from agentcore.testing import Blocked, Delayed, ScriptedModel
from subagent import (
    MaxDepthError,
    PoolClosedError,
    PoolStatistics,
    Result,
    Spec,
    Stream,
    TaskCancelled,
    TaskFailed,
    TaskStatus,
    TaskTimeout,
    UnknownAgentError,
    open_pool,
)
from subagent._pool._lifecycle import FRAMING

from .helpers import CountingModel, drain, kinds

Clock = trio.testing.MockClock


def counts(stats: PoolStatistics) -> tuple[int, int, int, int, int, int]:
    return (
        stats.accepted, stats.queued, stats.running, stats.finished, stats.failed,
        stats.cancelled,
    )


async def test_runs_tasks_and_returns_results(autojump_clock: Clock) -> None:
    model = CountingModel(delay=2.0)
    async with open_pool(max_concurrent=4) as pool:
        pool.register(Spec("a", model=model))
        pool.register(Spec("b", model=model))
        tasks = [await pool.submit(name, f"job {i}") for i, name in enumerate("abab")]
        results = [await t.wait() for t in tasks]
        assert trio.current_time() == 2.0
    assert [r.path for r in results] == [("a/0001",), ("b/0002",), ("a/0003",), ("b/0004",)]
    assert [r.output for r in results] == [f"done job {i}" for i in range(4)]
    assert results[0] == Result(
        ("a/0001",), "done job 0",
        RunSummary(turns=1, end_reason=EndReason.stop, duration=2.0),
    )
    assert counts(pool.statistics()) == (4, 0, 0, 4, 0, 0)
    assert [t.status for t in tasks] == [TaskStatus.finished] * 4


async def test_fresh_conversation_with_framing() -> None:
    model = CountingModel(delay=0)
    async with open_pool() as pool:
        pool.register(Spec("a", model=model, system_prompt="Be brief."))
        pool.register(Spec("b", model=model))
        await (await pool.submit("a", "first task")).wait()
        await (await pool.submit("b", "second task")).wait()
    first, second = model.requests
    assert [(m.role, m.content) for m in first.messages] == [
        ("system", f"Be brief.\n\n{FRAMING}"),
        ("user", "first task"),
    ]
    assert [(m.role, m.content) for m in second.messages] == [
        ("system", FRAMING),
        ("user", "second task"),
    ]


async def test_max_concurrent_respected_and_reached(autojump_clock: Clock) -> None:
    model = CountingModel(delay=1.0)
    async with open_pool(max_concurrent=3) as pool:
        pool.register(Spec("a", model=model))
        for i in range(10):
            await pool.submit("a", str(i))
    assert model.max_active == 3
    assert trio.current_time() == 4.0
    assert counts(pool.statistics()) == (10, 0, 0, 10, 0, 0)


async def test_submit_blocks_on_a_full_queue(autojump_clock: Clock) -> None:
    model = CountingModel(delay=5.0)
    async with open_pool(max_concurrent=1, max_queued=1) as pool:
        pool.register(Spec("a", model=model))
        await pool.submit("a", "1")
        await pool.submit("a", "2")
        with pytest.raises(trio.WouldBlock):
            pool.submit_nowait("a", "3")
        third = await pool.submit("a", "3")
        assert trio.current_time() == 5.0
        assert third.path == ("a/0003",)
        assert pool.statistics().queued == 1
    assert trio.current_time() == 15.0


async def test_cancelled_blocked_submit_leaves_no_trace(autojump_clock: Clock) -> None:
    model = CountingModel(delay=5.0)
    async with open_pool(max_concurrent=1, max_queued=1) as pool:
        pool.register(Spec("a", model=model))
        await pool.submit("a", "1")
        await pool.submit("a", "2")
        with trio.move_on_after(1.0) as scope:
            await pool.submit("a", "3")
        assert scope.cancelled_caught
        assert counts(pool.statistics()) == (2, 1, 1, 0, 0, 0)
        assert pool.statistics().waiting_submitters == 0
        fourth = await pool.submit("a", "4")
        assert fourth.path == ("a/0003",)
    assert model.inputs == ["1", "2", "4"]


async def test_close_unblocks_a_blocked_submit(autojump_clock: Clock) -> None:
    model = CountingModel(delay=5.0)
    async with open_pool(max_concurrent=1, max_queued=1) as pool:
        pool.register(Spec("a", model=model))
        await pool.submit("a", "1")
        await pool.submit("a", "2")
        async with trio.open_nursery() as nursery:

            async def blocked() -> None:
                with pytest.raises(PoolClosedError, match=r"^the pool is closed"):
                    await pool.submit("a", "3")

            nursery.start_soon(blocked)
            await trio.testing.wait_all_tasks_blocked()
            assert pool.statistics().waiting_submitters == 1
            pool.close()
        assert trio.current_time() == 0.0
        assert counts(pool.statistics()) == (2, 1, 1, 0, 0, 0)
    assert model.inputs == ["1", "2"]


async def test_submit_checks_in_order() -> None:
    async with open_pool(max_depth=2) as pool:
        pool.register(Spec("b", model=CountingModel()))
        pool.register(Spec("a", model=CountingModel()))
        pool.close()
        with pytest.raises(UnknownAgentError) as unknown:
            await pool.submit("zzz", "x", parent_path=("a/1", "b/2"))
        assert str(unknown.value) == "unknown agent 'zzz'; registered agents: a, b"
        assert unknown.value.registered == ("a", "b")
        with pytest.raises(MaxDepthError) as deep:
            await pool.submit("a", "x", parent_path=("a/1", "b/2"))
        assert str(deep.value) == (
            "cannot run agent 'a' under a/1/b/2: that would be depth 3, "
            "and the pool's max_depth is 2"
        )
        with pytest.raises(PoolClosedError) as closed:
            await pool.submit("a", "x", parent_path=("a/1",))
        assert str(closed.value) == "the pool is closed: it accepts no new tasks"
        pool.cancel()
        with pytest.raises(PoolClosedError, match=r"^the pool was cancelled"):
            pool.submit_nowait("a", "x")
    assert counts(pool.statistics()) == (0, 0, 0, 0, 0, 0)


async def test_unknown_agent_with_none_registered() -> None:
    async with open_pool() as pool:
        with pytest.raises(UnknownAgentError, match=r"^unknown agent 'x'; registered agents: "
                           r"none are registered$"):
            pool.submit_nowait("x", "y")


async def test_paths_are_immutable_tuples_numbered_pool_wide() -> None:
    async with open_pool() as pool:
        pool.register(Spec("a", model=CountingModel(delay=0)))
        first = await pool.submit("a", "x")
        nested = await pool.submit("a", "y", parent_path=["root/0009"])  # type: ignore[arg-type]
    assert first.path == ("a/0001",)
    assert nested.path == ("root/0009", "a/0002")
    assert type(nested.path) is tuple
    with pytest.raises(attrs.exceptions.FrozenAttributeError):
        first.path = ("b",)


async def test_numbers_grow_past_9999() -> None:
    async with open_pool() as pool:
        pool.register(Spec("a", model=CountingModel(delay=0)))
        pool._numbers = iter([9999, 10000])  # type: ignore[assignment]
        assert (await pool.submit("a", "x")).path == ("a/9999",)
        assert (await pool.submit("a", "x")).path == ("a/10000",)


async def test_events_tagged_with_one_agent_end_per_task(autojump_clock: Clock) -> None:
    stream = Stream(1000)
    async with open_pool(max_concurrent=2, events=stream) as pool:
        pool.register(Spec("a", model=CountingModel()))
        for i in range(3):
            await pool.submit("a", str(i))
    stream.close()
    events = await drain(stream)
    for n in (1, 2, 3):
        path = (f"a/{n:04d}",)
        assert kinds(events, path) == [
            "task_queued", "task_started", "agent_start", "turn_start", "model_request",
            "model_response", "agent_end", "task_finished",
        ]
    assert all(e.call_id is None for e in events)
    ends = [e for e in events if e.kind == "agent_end"]
    assert len(ends) == 3
    assert ends[0].event is not None and ends[0].event.summary is not None
    assert ends[0].event.summary.end_reason is EndReason.stop


async def test_events_to_an_explicit_stream() -> None:
    pool_stream, own = Stream(100), Stream(100)
    async with open_pool(events=pool_stream) as pool:
        pool.register(Spec("a", model=CountingModel(delay=0)))
        await pool.submit("a", "x", events=own)
        await pool.submit("a", "y")
    pool_stream.close()
    own.close()
    assert {e.path for e in await drain(own)} == {("a/0001",)}
    assert {e.path for e in await drain(pool_stream)} == {("a/0002",)}


async def test_no_destination_never_blocks(autojump_clock: Clock) -> None:
    async with open_pool() as pool:
        pool.register(Spec("a", model=CountingModel()))
        result = await (await pool.submit("a", "x")).wait()
    assert result.output == "done x"


async def test_failure_raises_task_failed_with_cause() -> None:
    boom = ModelError("the model broke")
    async with open_pool() as pool:
        pool.register(Spec("a", model=ScriptedModel([boom])))
        task = await pool.submit("a", "x")
        with pytest.raises(TaskFailed) as failed:
            await task.wait()
    assert str(failed.value) == "task a/0001 failed: ModelError: the model broke"
    assert failed.value.__cause__ is boom
    assert failed.value.path == ("a/0001",)
    assert task.status is TaskStatus.failed
    assert counts(pool.statistics()) == (1, 0, 0, 0, 1, 0)


async def test_timeout_raises_task_timeout(autojump_clock: Clock) -> None:
    stream = Stream(100)
    async with open_pool(events=stream) as pool:
        pool.register(Spec("a", model=ScriptedModel([Delayed(60, "late")]), timeout=10))
        task = await pool.submit("a", "x")
        with pytest.raises(TaskTimeout, match=r"^task a/0001 timed out after 10s$"):
            await task.wait()
        assert trio.current_time() == 10.0
    stream.close()
    events = await drain(stream)
    assert events[-1].kind == "task_finished"
    assert events[-1].summary is not None
    assert events[-1].summary.end_reason is EndReason.timeout
    assert events[-1].error == "timed out after 10s"
    assert counts(pool.statistics()) == (1, 0, 0, 0, 1, 0)


async def test_idle_timeout(autojump_clock: Clock) -> None:
    async with open_pool() as pool:
        pool.register(Spec("a", model=ScriptedModel([Delayed(60, "late")]), idle_timeout=30))
        task = await pool.submit("a", "x")
        with pytest.raises(
            TaskTimeout, match=r"^task a/0001 was idle for 30s: no event within its idle_timeout$"
        ):
            await task.wait()
        assert trio.current_time() == 30.0


async def test_cancel_aborts_running_and_queued_tasks(autojump_clock: Clock) -> None:
    model = CountingModel(delay=10.0)
    async with open_pool(max_concurrent=2) as pool:
        pool.register(Spec("a", model=model))
        tasks = [await pool.submit("a", str(i)) for i in range(5)]
        await trio.sleep(1)
        pool.cancel()
        pool.cancel()
        for task in tasks:
            with pytest.raises(TaskCancelled, match=f"^task {task.path[0]} was cancelled$"):
                await task.wait()
    assert trio.current_time() == 1.0
    assert model.inputs == ["0", "1"]
    assert counts(pool.statistics()) == (5, 0, 0, 0, 0, 5)
    assert [t.status for t in tasks] == [TaskStatus.cancelled] * 5


async def test_task_cancel_queued_never_runs(autojump_clock: Clock) -> None:
    model = CountingModel(delay=10.0)
    stream = Stream(100)
    async with open_pool(max_concurrent=1, events=stream) as pool:
        pool.register(Spec("a", model=model))
        first = await pool.submit("a", "1")
        second = await pool.submit("a", "2")
        assert second.status is TaskStatus.queued
        second.cancel()
        assert counts(pool.statistics()) == (2, 0, 1, 0, 0, 1)
        with pytest.raises(TaskCancelled):
            await second.wait()
        assert (await first.wait()).output == "done 1"
    stream.close()
    assert kinds(await drain(stream), ("a/0002",)) == ["task_queued", "task_cancelled"]
    assert model.inputs == ["1"]


async def test_leaving_normally_waits_for_everything(autojump_clock: Clock) -> None:
    model = CountingModel(delay=3.0)
    async with open_pool(max_concurrent=1) as pool:
        pool.register(Spec("a", model=model))
        tasks = [await pool.submit("a", str(i)) for i in range(3)]
    assert trio.current_time() == 9.0
    assert all(t.done for t in tasks)
    assert pool.statistics().closed


async def test_leaving_by_exception_cancels_first(autojump_clock: Clock) -> None:
    model = CountingModel(delay=3.0)
    with pytest.raises(KeyError, match="stop"):
        async with open_pool(max_concurrent=1) as pool:
            pool.register(Spec("a", model=model))
            tasks = [await pool.submit("a", str(i)) for i in range(3)]
            raise KeyError("stop")
    assert trio.current_time() == 0.0
    assert [t.status for t in tasks] == [TaskStatus.cancelled] * 3
    assert model.active == 0


async def test_outer_cancel_ends_everything(autojump_clock: Clock) -> None:
    model = CountingModel(delay=3.0)
    with trio.move_on_after(1):
        async with open_pool(max_concurrent=1) as pool:
            pool.register(Spec("a", model=model))
            tasks = [await pool.submit("a", str(i)) for i in range(3)]
            await trio.sleep_forever()
    assert trio.current_time() == 1.0
    assert [t.status for t in tasks] == [TaskStatus.cancelled] * 3
    assert counts(pool.statistics()) == (3, 0, 0, 0, 0, 3)


async def test_submits_racing_close_never_crash(autojump_clock: Clock) -> None:
    model = CountingModel(delay=1.0)
    outcomes: list[str] = []
    async with open_pool(max_concurrent=2, max_queued=2) as pool:
        pool.register(Spec("a", model=model))

        async def submitter(i: int) -> None:
            try:
                await pool.submit("a", str(i))
            except PoolClosedError:
                outcomes.append("closed")
            else:
                outcomes.append("accepted")

        async with trio.open_nursery() as nursery:
            for i in range(10):
                nursery.start_soon(submitter, i)
            await trio.sleep(1.5)
            pool.close()
    stats = pool.statistics()
    assert outcomes.count("accepted") == stats.accepted == stats.finished == 6
    assert outcomes.count("closed") == 4
    assert counts(stats) == (6, 0, 0, 6, 0, 0)


async def test_statistics_and_repr(autojump_clock: Clock) -> None:
    async with open_pool(max_concurrent=1, max_queued=5, max_depth=3) as pool:
        pool.register(Spec("a", model=ScriptedModel([Blocked("x"), "y"])))
        first = await pool.submit("a", "1")
        second = await pool.submit("a", "2")
        await trio.testing.wait_all_tasks_blocked()
        assert pool.statistics() == PoolStatistics(
            running=1, queued=1, finished=0, failed=0, cancelled=0, accepted=2,
            holding_slots=1, waiting_submitters=0, max_concurrent=1, max_queued=5,
            max_depth=3, closed=False,
        )
        assert repr(pool) == (
            "<subagent.Pool agents=['a'] running=1 queued=1 finished=0 failed=0 cancelled=0>"
        )
        assert repr(first) == "<subagent.Task a/0001 running>"
        assert repr(second) == "<subagent.Task a/0002 queued>"
        pool.cancel()
    assert repr(pool) == (
        "<subagent.Pool agents=['a'] running=0 queued=0 finished=0 failed=0 cancelled=2 "
        "cancelled>"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_concurrent": 0}, "open_pool max_concurrent must be at least 1, not 0"),
        ({"max_queued": 0}, "open_pool max_queued must be at least 1, not 0"),
        ({"max_depth": 0}, "open_pool max_depth must be at least 1, not 0"),
        ({"children_timeout": 0.0}, "open_pool children_timeout must be positive, not 0.0"),
    ],
)
async def test_open_pool_rejects_bad_limits(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError) as info:
        async with open_pool(**kwargs):  # type: ignore[arg-type]
            pass
    assert str(info.value) == message


async def test_model_request_sees_the_task_verbatim() -> None:
    seen: list[ModelRequest] = []

    def script(request: ModelRequest) -> str:
        seen.append(request)
        return "ok"

    async with open_pool() as pool:
        pool.register(Spec("a", model=ScriptedModel(script)))
        await (await pool.submit("a", "  exact\ntext  ")).wait()
    assert seen[0].messages[-1].content == "  exact\ntext  "


async def test_body_exception_comes_back_unwrapped_with_its_cause() -> None:
    cause = ValueError("why")
    with pytest.raises(KeyError) as info:
        async with open_pool():
            raise KeyError("stop") from cause
    assert info.value.__cause__ is cause
