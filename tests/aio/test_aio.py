"""What only the asyncio side has (issue 37): asyncio tools on the host loop, pools
sharing one guest run, cancellation of the block from asyncio, and a property over
random submit / cancel / consume schedules."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

import subagent
import subagent.aio as aio
from agentcore import read_only
from agentcore.testing import ScriptedModel, tool_call_reply
from subagent import Defaults, Spec, TaskCancelled, TaskStatus

from ._drivers import GateModel


def test_an_asyncio_tool_runs_on_the_host_loop() -> None:
    seen: dict[str, Any] = {}

    @aio.tool(read_only=True)
    async def lookup(key: str) -> str:
        """Look a key up."""
        seen["loop"] = asyncio.get_running_loop()
        seen["task"] = asyncio.current_task()
        await asyncio.sleep(0)
        return key.upper()

    async def main() -> None:
        model = ScriptedModel([tool_call_reply("lookup", '{"key": "abc"}'), "found"])
        async with aio.open_pool(defaults=Defaults(model=model, gate=read_only)) as pool:
            pool.register(Spec(name="w", description="works", tools=[lookup]))
            result = await (await pool.submit("w", "go")).wait()
        assert result.output == "found"
        assert seen["loop"] is asyncio.get_running_loop()
        assert seen["task"] is not None
        assert [m.content for m in result.messages if m.role == "tool"] == ["ABC"]

    asyncio.run(main())


def test_a_timed_out_asyncio_tool_is_cancelled_on_the_host_loop() -> None:
    ended: list[str] = []

    @aio.tool(read_only=True)
    async def forever() -> str:
        """Never answers."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        return "never"

    async def main() -> None:
        model = ScriptedModel([tool_call_reply("forever"), "gave up"])
        async with aio.open_pool(defaults=Defaults(model=model, gate=read_only)) as pool:
            pool.register(Spec(name="w", description="works", tools=[forever],
                               tool_timeout=0.05))
            result = await (await pool.submit("w", "go")).wait()
        assert result.output == "gave up"
        [answer] = [m.content for m in result.messages if m.role == "tool"]
        assert "timed out" in answer
        assert ended == ["cancelled"]

    asyncio.run(main())


def test_an_asyncio_tool_outside_an_aio_pool_is_an_error_result() -> None:
    @aio.tool(read_only=True)
    async def lonely() -> str:
        """Runs nowhere."""
        return "x"

    async def main() -> None:
        model = ScriptedModel([tool_call_reply("lonely"), "ok"])
        async with subagent.open_pool(defaults=Defaults(model=model, gate=read_only)) as pool:
            pool.register(Spec(name="w", description="works", tools=[lonely]))
            result = await (await pool.submit("w", "go")).wait()
        [answer] = [m.content for m in result.messages if m.role == "tool"]
        assert "an asyncio tool runs only in a pool opened by subagent.aio.open_pool" in answer

    trio.run(main)


def test_aio_tool_refuses_a_sync_function() -> None:
    def plain() -> str:
        return "x"

    with pytest.raises(TypeError, match="takes an async def function"):
        aio.tool(plain)  # type: ignore[arg-type]


def test_two_pools_share_one_guest_run_that_ends_with_the_last() -> None:
    async def main() -> None:
        model = ScriptedModel(["a", "b"])
        async with aio.open_pool(defaults=Defaults(model=model)) as one:
            host = aio._host.current_host()
            async with aio.open_pool(defaults=Defaults(model=model)) as two:
                assert aio._host.current_host() is host
                one.register(Spec(name="w", description="works"))
                two.register(Spec(name="w", description="works"))
                outputs = [(await (await p.submit("w", "x")).wait()).output for p in (one, two)]
            assert outputs == ["a", "b"]
            assert host is not None and not host.ended
        assert host.ended and aio._host.current_host() is None

    asyncio.run(main())


def test_cancelling_the_block_cancels_its_tasks_and_waits_for_them() -> None:
    model = GateModel()
    seen: dict[str, Any] = {}

    async def body() -> None:
        async with aio.open_pool(defaults=Defaults(model=model)) as pool:
            pool.register(Spec(name="w", description="works"))
            seen["tasks"] = [await pool.submit("w", f"t{i}") for i in range(2)]
            seen["inside"] = True
            await asyncio.Event().wait()

    async def main() -> None:
        outer = asyncio.create_task(body())
        while "inside" not in seen:  # noqa: ASYNC110 (waits for the body's task)
            await asyncio.sleep(0)
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer
        assert [t.status for t in seen["tasks"]] == [TaskStatus.cancelled] * 2
        assert model.active == 0

    asyncio.run(main())


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), st.integers(0, 3)),
        st.tuples(st.just("cancel"), st.integers(0, 30)),
        st.tuples(st.just("read"), st.integers(1, 8)),
        st.tuples(st.just("release"), st.just(0)),
        st.tuples(st.just("settle"), st.just(0)),
    ),
    max_size=25,
)


@given(ops=_OPS, buffer=st.integers(0, 4), concurrent=st.integers(1, 3))
def test_random_schedules_from_asyncio_end_every_task(
        ops: list[tuple[str, int]], buffer: int, concurrent: int) -> None:
    model = GateModel()

    async def main() -> None:
        events = aio.Stream(buffer)
        tasks: list[aio.AioTask] = []
        received: list[subagent.Event] = []
        readers: list[asyncio.Task[None]] = []

        async def read(count: int) -> None:
            for _ in range(count):
                try:
                    received.append(await events.receive())
                except trio.EndOfChannel:
                    return

        async with aio.open_pool(max_concurrent=concurrent, max_queued=64, events=events,
                                 defaults=Defaults(model=model)) as pool:
            pool.register(Spec(name="w", description="works"))
            host = aio._host.current_host()
            assert host is not None
            for op, arg in ops:
                if op == "submit":
                    for _ in range(arg):
                        tasks.append(pool.submit_nowait("w", f"t{len(tasks)}"))
                elif op == "cancel" and tasks:
                    tasks[arg % len(tasks)].cancel()
                elif op == "read":
                    readers.append(asyncio.create_task(read(arg)))
                elif op == "release":
                    model.release()
                else:
                    await host.call(trio.testing.wait_all_tasks_blocked)
            # Drain so that nothing stays blocked on the stream, then let them end.
            model.release()
            drain = asyncio.create_task(read(10**9))
            outcomes: list[str | None] = []
            for task in tasks:
                try:
                    outcomes.append((await task.wait()).output)
                except TaskCancelled:
                    outcomes.append(None)
        events.close()
        await drain
        for reader in readers:
            await reader
        stats = pool.statistics()
        assert all(task.done for task in tasks)
        assert stats.running == stats.queued == 0
        assert stats.finished + stats.cancelled + stats.failed == stats.accepted == len(tasks)
        assert stats.finished == sum(o is not None for o in outcomes)
        s = events.statistics()
        # Delivered or counted: every event the stream took was read (the drain ran
        # to the close), and the lifecycle events never wait, so none is lost.
        assert (s.sent, s.buffered, s.dropped) == (len(received), 0, 0)
        finished = [e for e in received if str(e.kind) in ("task_finished", "task_cancelled")]
        assert len(finished) == len(tasks)

    asyncio.run(main())


def test_a_sync_call_from_asyncio_wakes_the_guest_run() -> None:
    # Nothing is bridged after the cancel: the guest run, waiting for I/O with no
    # deadline, must notice the task the cancel rescheduled by itself.
    model = GateModel()

    async def main() -> None:
        async with aio.open_pool(defaults=Defaults(model=model)) as pool:
            pool.register(Spec(name="w", description="works"))
            task = await pool.submit("w", "x")
            await aio._host.current_host().call(trio.testing.wait_all_tasks_blocked)  # type: ignore[union-attr]
            task.cancel()

            async def ended() -> None:
                # Polled on purpose: no bridged call may wake the guest run here.
                while not task.done:  # noqa: ASYNC110
                    await asyncio.sleep(0.001)

            await asyncio.wait_for(ended(), 10)
            assert task.status is TaskStatus.cancelled

    asyncio.run(main())


def test_a_thread_inside_trio_run_cannot_host_a_guest_run() -> None:
    async def in_asyncio() -> None:
        async with aio.open_pool():
            raise AssertionError("unreachable")

    async def in_trio() -> None:
        asyncio.run(in_asyncio())

    with pytest.raises(RuntimeError, match=r"Attempted to call run\(\) from inside a run\(\)"):
        trio.run(in_trio)
    assert aio._host.current_host() is None


def test_a_cancel_while_the_guest_run_starts_ends_it() -> None:
    async def main() -> None:
        opening = asyncio.create_task(_open_and_hold())
        await asyncio.sleep(0)  # it has called start_guest_run and waits for it
        host = aio._host.current_host()
        assert host is not None and host.token is None
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        assert host.ended and aio._host.current_host() is None

    asyncio.run(main())


async def _open_and_hold() -> None:
    async with aio.open_pool():
        raise AssertionError("unreachable")
