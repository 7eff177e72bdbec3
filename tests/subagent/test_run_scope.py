"""A pool run's one cancel scope (issue 17, items 4 and 5): the run aborts by
cancelling its task's scope (``Run.run(owner=task)``), and tells its abort from the
task's cancel and its limits' deadline. Each case ends exactly as it did when the run
had a scope of its own: an abort while parked, an abort a deadline overtakes, an
abort and a cancel at once (either order), an abort of parallel tool calls (a group
of Cancelled). Each passes on the code before the change too."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentcore import (
    Agent,
    EndReason,
    FunctionTool,
    Message,
    Run,
    RunResult,
    ToolCall,
    current_run,
)
from agentcore.testing import Blocked, ScriptedModel, tool_call_reply
from ledger import MemorySink
from subagent import (
    Defaults,
    Event,
    Spec,
    Stream,
    TaskCancelled,
    TaskStatus,
    TaskTimeout,
    open_pool,
)

from .helpers import drain

Clock = trio.testing.MockClock


def _grab(runs: list[Run], *, shielded: float = 0.0) -> FunctionTool:
    # A tool that hands its run to the test (aborting it first when shielded: then it
    # sleeps ``shielded`` seconds in a shielded scope).
    async def grab(arguments: str) -> str:
        run = current_run()
        assert run is not None
        runs.append(run)
        if shielded:
            run.abort("mid-call")
            with trio.CancelScope(shield=True):
                await trio.sleep(shielded)
        return "ok"

    return FunctionTool("grab", "hand over the run", {}, grab)


def _own(events: list[Event], path: str) -> list[tuple[str, str]]:
    return [
        (str(e.event.kind), e.event.text)
        for e in events
        if e.path == (path,) and e.event is not None
    ]


async def test_an_abort_while_parked_ends_the_run_aborted_not_timed_out(
    autojump_clock: Clock,
) -> None:
    # The task has a timeout (its scope has a deadline) and the run is parked in its
    # second model call: the abort cancels the task's scope, yet it is an abort.
    runs: list[Run] = []
    model = ScriptedModel([tool_call_reply("grab", "{}"), Blocked("never")])
    stream = Stream(1000)
    audit = MemorySink()
    async with open_pool(events=stream, defaults=Defaults(audit=audit)) as pool:
        pool.register(Spec("a", model=model, tools=[_grab(runs)], timeout=100))
        task = await pool.submit("a", "go")
        await trio.testing.wait_all_tasks_blocked()
        assert trio.current_time() == 0
        runs[0].abort("enough")
        with pytest.raises(TaskCancelled) as info:
            await task.wait()
    assert str(info.value) == "task a/0001 was cancelled"
    assert trio.current_time() == 0
    assert task.status is TaskStatus.cancelled
    summary = runs[0].summary
    assert summary is not None
    assert (summary.end_reason, summary.error, summary.turns) == (EndReason.aborted, None, 2)
    # Rolled back to the start of the aborted turn.
    assert [m.role for m in runs[0].messages] == ["system", "user", "assistant", "tool"]
    abort = [e for e in audit.entries if e.kind == "abort"]
    assert [e.error for e in abort] == ["enough"]
    stream.close()
    own = _own(await drain(stream), "a/0001")
    assert own[-2:] == [("interrupt_received", "abort: enough"), ("agent_end", "")]


async def test_an_abort_a_deadline_overtakes_is_a_timeout(autojump_clock: Clock) -> None:
    # Aborted at 0 inside a shielded wait that outlasts the timeout (5 s): when the
    # shield ends at 10 both the abort and the deadline have cancelled the run, and
    # the deadline's scope (the task's) ends it, as it did when the abort had a scope
    # of its own.
    runs: list[Run] = []
    model = ScriptedModel([tool_call_reply("grab", "{}"), "never read"])
    async with open_pool() as pool:
        pool.register(Spec("a", model=model, tools=[_grab(runs, shielded=10)], timeout=5))
        task = await pool.submit("a", "go")
        with pytest.raises(TaskTimeout) as info:
            await task.wait()
    assert str(info.value) == "task a/0001 timed out after 5s"
    assert trio.current_time() == 10
    assert task.status is TaskStatus.timed_out
    assert runs[0].summary is not None
    assert runs[0].summary.end_reason is EndReason.aborted
    assert runs[0].abort_requested


async def test_an_abort_within_the_timeout_is_an_abort(autojump_clock: Clock) -> None:
    # The same shielded wait within the timeout: the abort alone ends the run.
    runs: list[Run] = []
    model = ScriptedModel([tool_call_reply("grab", "{}"), "never read"])
    async with open_pool() as pool:
        pool.register(Spec("a", model=model, tools=[_grab(runs, shielded=3)], timeout=5))
        task = await pool.submit("a", "go")
        with pytest.raises(TaskCancelled):
            await task.wait()
    assert trio.current_time() == 3
    assert task.status is TaskStatus.cancelled
    summary = runs[0].summary
    assert summary is not None
    assert (summary.end_reason, summary.error, summary.turns) == (EndReason.aborted, None, 1)
    assert [m.role for m in runs[0].messages] == ["system", "user"]


async def test_an_abort_and_a_cancel_at_once_is_a_cancel(autojump_clock: Clock) -> None:
    # Both before the run wakes: the cancel's Cancelled ends the run (not rolled back,
    # and it propagates to the task's scope), as when the abort had a scope of its own.
    runs: list[Run] = []
    model = ScriptedModel([tool_call_reply("grab", "{}"), Blocked("never")])
    audit = MemorySink()
    async with open_pool(defaults=Defaults(audit=audit)) as pool:
        pool.register(Spec("a", model=model, tools=[_grab(runs)]))
        task = await pool.submit("a", "go")
        await trio.testing.wait_all_tasks_blocked()
        runs[0].abort("enough")
        task.cancel()
        with pytest.raises(TaskCancelled):
            await task.wait()
    assert task.status is TaskStatus.cancelled
    summary = runs[0].summary
    assert summary is not None
    assert (summary.end_reason, summary.turns) == (EndReason.aborted, 2)
    assert [m.role for m in runs[0].messages] == ["system", "user", "assistant", "tool"]
    abort = [e for e in audit.entries if e.kind == "abort"]
    # Who cancelled it (the caller), never the cancelling task's repr.
    assert [e.error for e in abort] == [
        "cancelled (caller): Task.cancel() of it or of a task above it"]


async def test_a_cancel_then_an_abort_is_a_cancel(autojump_clock: Clock) -> None:
    runs: list[Run] = []
    model = ScriptedModel([tool_call_reply("grab", "{}"), Blocked("never")])
    async with open_pool() as pool:
        pool.register(Spec("a", model=model, tools=[_grab(runs)], timeout=50))
        task = await pool.submit("a", "go")
        await trio.testing.wait_all_tasks_blocked()
        task.cancel()
        runs[0].abort("late")
        with pytest.raises(TaskCancelled):
            await task.wait()
    assert task.status is TaskStatus.cancelled
    assert trio.current_time() == 0


async def test_a_plain_run_keeps_a_scope_of_its_own(autojump_clock: Clock) -> None:
    # Without an owner the run's abort cancels only its own scope: the caller's code
    # after it runs on uncancelled.
    runs: list[Run] = []
    agent = Agent(
        model=ScriptedModel([tool_call_reply("grab", "{}"), Blocked("never")]),
        tools=[_grab(runs)],
    )
    async with trio.open_nursery() as nursery:
        results: list[object] = []

        async def go() -> None:
            results.append(await agent.run("go"))
            await trio.sleep(1)  # not cancelled
            results.append("after")

        nursery.start_soon(go)
        await trio.testing.wait_all_tasks_blocked()
        runs[0].abort("enough")
    assert results[1] == "after"
    assert trio.current_time() == 1
    result = results[0]
    assert isinstance(result, RunResult)
    assert result.summary.end_reason is EndReason.aborted
    assert [m.role for m in result.messages] == ["user", "assistant", "tool"]


async def test_an_abort_of_parallel_tool_calls_is_an_abort(autojump_clock: Clock) -> None:
    # Both calls are cancelled: the Cancelled the run sees may be a group of them.
    runs: list[Run] = []

    async def hang(arguments: str) -> str:
        run = current_run()
        assert run is not None
        runs.append(run)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    both = (ToolCall("h1", "hang", "{}"), ToolCall("h2", "hang", "{}"))
    model = ScriptedModel([Message("assistant", tool_calls=both)])
    async with open_pool() as pool:
        pool.register(Spec("a", model=model, timeout=100,
                           tools=[FunctionTool("hang", "hang", {}, hang, read_only=True)]))
        task = await pool.submit("a", "go")
        await trio.testing.wait_all_tasks_blocked()
        assert len(runs) == 2
        runs[0].abort("enough")
        with pytest.raises(TaskCancelled):
            await task.wait()
    assert task.status is TaskStatus.cancelled
    summary = runs[0].summary
    assert summary is not None
    assert (summary.end_reason, summary.error, summary.turns) == (EndReason.aborted, None, 1)
    assert [m.role for m in runs[0].messages] == ["system", "user"]
