"""subagent.testing: the invariant checker, the strategies, and the documented example."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import agentcore
from agentcore import EndReason, GateDecision, RunSummary, ToolCall
from subagent import (
    Defaults,
    Event,
    EventKind,
    Spec,
    Stream,
    SubagentError,
    SubagentResultsTool,
    SubagentTool,
    Task,
    open_pool,
)
from subagent.testing import (
    EventLogError,
    EventLogReport,
    Job,
    ScriptedModel,
    Workload,
    check_events,
    delegate_reply,
    specs,
    workloads,
)
from tests.subagent.helpers import all_tasks

A = ("a/0001",)
B = ("a/0002",)
AK = agentcore.EventKind


def run_event(path: tuple[str, ...], kind: AK, turn: int = 0,
              call: ToolCall | None = None) -> Event:
    inner = agentcore.Event(kind, "r", "a", turn, call=call)
    return Event(path, kind, inner)


def pool_event(path: tuple[str, ...], kind: EventKind) -> Event:
    return Event(path, kind)


def whole_run(path: tuple[str, ...]) -> list[Event]:
    return [
        pool_event(path, EventKind.task_queued),
        pool_event(path, EventKind.task_started),
        run_event(path, AK.agent_start),
        run_event(path, AK.turn_start, 1),
        run_event(path, AK.agent_end, 1),
        pool_event(path, EventKind.task_finished),
    ]


def test_a_good_log_passes_with_its_report() -> None:
    log = whole_run(A) + whole_run(B)
    assert check_events(log, max_concurrent=1) == EventLogReport(12, 2, 2, 1)


def test_interleaved_runs_count_toward_the_bound() -> None:
    a, b = whole_run(A), whole_run(B)
    log = a[:3] + b[:3] + a[3:] + b[3:]
    assert check_events(log, max_concurrent=2).peak_concurrency == 2
    with pytest.raises(EventLogError) as info:
        check_events(log, max_concurrent=1)
    assert str(info.value) == (
        "event 4 (task_started) of a/0002: 2 runs hold a concurrency slot at once, "
        "and max_concurrent is 1"
    )


def test_a_run_delegating_lends_its_slot() -> None:
    child = ("a/0001", "a/0002")
    call = ToolCall("c1", "subagent", "{}")
    a = whole_run(A)
    log = [
        *a[:4],
        run_event(A, AK.tool_start, 1, call),
        run_event(A, AK.gate_decision, 1, call),
        *whole_run(child),
        run_event(A, AK.tool_end, 1, call),
        *a[4:],
    ]
    assert check_events(log, max_concurrent=1) == EventLogReport(15, 2, 2, 1)


@pytest.mark.parametrize(
    ("log", "message"),
    [
        ([run_event(A, AK.turn_start)], "event 0 (turn_start) of a/0001: "
         "a run's event before its agent_start"),
        ([*whole_run(A)[:5], run_event(A, AK.agent_end, 1)], "event 5 (agent_end) of a/0001: "
         "a run's event after its agent_end"),
        ([*whole_run(A)[:3], run_event(A, AK.agent_start)], "event 3 (agent_start) of a/0001: "
         "a second agent_start"),
        ([*whole_run(A)[:4], pool_event(A, EventKind.task_finished)],
         "event 4 (task_finished) of a/0001: the task ended with its run's agent_end missing"),
        ([*whole_run(A), pool_event(A, EventKind.task_cancelled)],
         "event 6 (task_cancelled) of a/0001: an event after the task's terminal event"),
        ([pool_event(A, EventKind.task_started), pool_event(A, EventKind.task_queued)],
         "event 1 (task_queued) of a/0001: task_queued is not the task's first event"),
        ([*whole_run(A)[:4], run_event(A, AK.turn_start, 0)],
         "event 4 (turn_start) of a/0001: turn 0 after turn 1"),
        ([*whole_run(A)[:4], run_event(A, AK.tool_end, 1, ToolCall("x", "t", "{}"))],
         "event 4 (tool_end) of a/0001: tool_end without its call's tool_start"),
        (whole_run(A)[:4], "a/0001: agent_start without agent_end"),
        (whole_run(A)[:2], "a/0001: no task_finished or task_cancelled"),
    ],
)
def test_broken_logs_name_the_path_and_event(log: list[Event], message: str) -> None:
    with pytest.raises(EventLogError) as info:
        check_events(log)
    assert str(info.value) == message


def test_an_event_delivered_twice_is_caught() -> None:
    log = whole_run(A)
    with pytest.raises(EventLogError, match=r"^event 3 .* the same event object was delivered"):
        check_events([*log[:3], log[2], *log[3:]])


def test_an_incomplete_log_may_be_checked_while_running() -> None:
    assert check_events(whole_run(A)[:4], complete=False).runs == 1


def test_importing_subagent_does_not_import_hypothesis() -> None:
    code = ("import sys, subagent, subagent.testing; "
            "assert 'hypothesis' not in sys.modules, 'hypothesis imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr


@settings(max_examples=50)
@given(specs())
def test_drawn_specs_register(spec: Spec) -> None:
    async def main() -> None:
        async with open_pool(defaults=Defaults(model=ScriptedModel(["hi"]))) as pool:
            pool.register(spec)
            assert pool.specs[spec.name].name == spec.name

    trio.run(main)


async def test_delegate_reply_drives_the_delegation_tool() -> None:
    events = Stream(1000)
    async with open_pool(events=events) as pool:
        pool.register(Spec("w", model=ScriptedModel(["inner"])))
        pool.register(Spec("boss", model=ScriptedModel([delegate_reply("w", "go"), "outer"]),
                            tools=[SubagentTool(pool)]))
        result = await (await pool.submit("boss", "start")).wait()
    events.close()
    assert result.output == "outer"
    assert check_events([e async for e in events], max_concurrent=8) == EventLogReport(
        22, 2, 2, 1)


# The module docstring's example, as users would write it.
@pytest.mark.slow
@given(workloads(), st.integers(1, 4))
def test_documented_example(workload: Workload, max_concurrent: int) -> None:
    async def main() -> None:
        events = Stream(100_000)
        async with open_pool(max_concurrent=max_concurrent, events=events) as pool:
            pool.register(Spec("worker", model=workload.model(), tools=[SubagentTool(pool)]))
            tasks = [await pool.submit("worker", workload.input(job))
                     for job in workload.roots]
            for task in tasks:
                with contextlib.suppress(SubagentError):
                    await task.wait()
        events.close()
        log = [event async for event in events]
        check_events(log, max_concurrent=max_concurrent)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_workload_model_plays_a_tree() -> None:
    workload = Workload((Job(1, 0.0, children=(Job(2, 0.0), Job(3, 0.0, fail=True))),))
    async with open_pool() as pool:
        pool.register(Spec("worker", model=workload.model(), tools=[SubagentTool(pool)]))
        result = await (await pool.submit("worker", "job 1")).wait()
    assert result.output == "done 1"
    assert result.summary.tool_errors == 1
    assert result.summary.end_reason is EndReason.stop
    assert isinstance(result.summary, RunSummary)
    assert GateDecision(True).allowed


# -- the checker on logs of the real pool (issue 15) ------------------------------------


async def test_a_run_waiting_in_the_results_tool_lends_its_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The false report of issue 15: the parent waits in subagent_results while its
    # background child holds the only slot.
    workload = Workload((Job(1, 1.0, children=(Job(2, 1.0, background=True),)),))
    events = Stream(1000)
    async with open_pool(max_concurrent=1, events=events) as pool:
        pool.register(Spec("worker", model=workload.model(),
                           tools=[SubagentTool(pool), SubagentResultsTool(pool)]))
        result = await (await pool.submit("worker", "job 1")).wait()
    events.close()
    log = [event async for event in events]
    assert result.output == "done 1"
    assert [str(e.kind) for e in log if isinstance(e.kind, EventKind)] == [
        "task_queued", "task_started", "task_queued", "task_started", "task_finished",
        "result_delivered", "task_finished",
    ]
    assert check_events(log, max_concurrent=1).peak_concurrency == 1
    # The checker of issue 15 modelled lending for the delegation tool alone.
    with pytest.raises(EventLogError, match="2 runs hold a concurrency slot at once"):
        check_events(log, max_concurrent=1, results_tool="not-lending")


def _lending_log(tool: str) -> list[Event]:
    # A holds the one slot, lends it in a call of ``tool`` to B, then goes on.
    call = ToolCall("c1", tool, "{}")
    a, b = whole_run(A), whole_run(B)
    return [
        *a[:4],
        run_event(A, AK.tool_start, 1, call),
        *b,
        run_event(A, AK.tool_end, 1, call),
        run_event(A, AK.turn_start, 2),
        run_event(A, AK.agent_end, 2),
        a[5],
    ]


@pytest.mark.parametrize("tool", ["subagent", "subagent_results"])
def test_every_slot_lending_tool_lends_the_slot(tool: str) -> None:
    assert check_events(_lending_log(tool), max_concurrent=1) == EventLogReport(
        15, 2, 2, 1)
    with pytest.raises(EventLogError) as info:
        check_events(_lending_log("search"), max_concurrent=1)
    assert str(info.value) == (
        "event 6 (task_started) of a/0002: 2 runs hold a concurrency slot at once, "
        "and max_concurrent is 1"
    )


def test_a_lending_run_that_goes_on_while_another_holds_the_slot_is_caught() -> None:
    # A's call ends while B still runs, and A makes a model call: two runs at once.
    call = ToolCall("c1", "subagent_results", "{}")
    a, b = whole_run(A), whole_run(B)
    log = [
        *a[:4], run_event(A, AK.tool_start, 1, call), *b[:4],
        run_event(A, AK.tool_end, 1, call), run_event(A, AK.turn_start, 2),
    ]
    with pytest.raises(EventLogError) as info:
        check_events(log, max_concurrent=1, complete=False)
    assert str(info.value) == (
        "event 10 (turn_start) of a/0001: 2 runs hold a concurrency slot at once, "
        "and max_concurrent is 1"
    )


def test_parallel_lending_calls_lend_until_the_last_one_ends() -> None:
    first, second = ToolCall("c1", "subagent", "{}"), ToolCall("c2", "subagent", "{}")
    a, b = whole_run(A), whole_run(B)
    log = [
        *a[:4], run_event(A, AK.tool_start, 1, first), run_event(A, AK.tool_start, 1, second),
        *b[:3], run_event(A, AK.tool_end, 1, first), *b[3:],
        run_event(A, AK.tool_end, 1, second), run_event(A, AK.turn_start, 2),
        run_event(A, AK.agent_end, 2), a[5],
    ]
    assert check_events(log, max_concurrent=1).peak_concurrency == 1


def _delivered(parent: tuple[str, ...], child: tuple[str, ...]) -> Event:
    return Event(parent, EventKind.result_delivered, child=child, output="x")


def _orphaned(path: tuple[str, ...]) -> Event:
    return Event(path, EventKind.task_orphaned, output="x")


C = ("a/0001", "a/0002")


@pytest.mark.parametrize(
    ("log", "message"),
    [
        ([*whole_run(A)[:4], *whole_run(C), _delivered(A, C), _delivered(A, C)],
         "event 11 (result_delivered) of a/0001: "
         "a background result delivered or orphaned twice"),
        ([*whole_run(A)[:4], *whole_run(C), _delivered(A, C), _orphaned(C)],
         "event 11 (task_orphaned) of a/0001/a/0002: "
         "a background result delivered or orphaned twice"),
        ([*whole_run(A)[:4], *whole_run(C)[:4], _delivered(A, C)],
         "event 8 (result_delivered) of a/0001: "
         "a background result before the task's terminal event"),
        ([*whole_run(C)[:4], _orphaned(C)],
         "event 4 (task_orphaned) of a/0001/a/0002: "
         "a background result before the task's terminal event"),
        ([*whole_run(C), *whole_run(A), _delivered(A, C)],
         "event 12 (result_delivered) of a/0001: a result delivered outside its parent's run"),
    ],
)
def test_broken_background_results_are_caught(log: list[Event], message: str) -> None:
    with pytest.raises(EventLogError) as info:
        check_events(log, complete=False)
    assert str(info.value) == message


async def _play(workload: Workload, max_concurrent: int, limit: float | None,
                buffer: int, pace: float, cancels: list[tuple[float, int]]) -> list[Event]:
    # Every event of the pool through one blocking stream and a consumer taking
    # ``pace`` seconds per event; ``cancels``: (when, which task of those so far).
    events = Stream(buffer)
    log: list[Event] = []

    async def consume() -> None:
        async for event in events:
            log.append(event)
            await trio.sleep(pace)

    async def cancel_some(tasks: list[Task]) -> None:
        start = trio.current_time()
        for when, which in cancels:
            await trio.sleep_until(start + when)
            found = all_tasks(tasks)
            found[which % len(found)].cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with open_pool(max_concurrent=max_concurrent, events=events) as pool:
            model = workload.model()
            tools: list[agentcore.Tool] = [SubagentTool(pool), SubagentResultsTool(pool)]
            pool.register(Spec("worker", model=model, tools=tools, timeout=limit))
            pool.register(Spec("critical-worker", model=model, tools=tools,
                               timeout=limit, critical=True))
            tasks = [await pool.submit("worker", workload.input(j)) for j in workload.roots]
            async with trio.open_nursery() as helpers:
                if tasks:
                    helpers.start_soon(cancel_some, tasks)
                for task in tasks:
                    with contextlib.suppress(SubagentError):
                        await task.wait()
        events.close()
    return log


@given(
    workloads(background=True, critical=True, max_jobs=10),
    st.integers(1, 3),
    st.sampled_from([None, 1.5, 4.0]),
    st.sampled_from([0, 1, 64]),
    st.sampled_from([0.0, 0.01]),
    st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.5]), st.integers(0, 20)),
             max_size=2),
)
@pytest.mark.slow
def test_the_checker_accepts_every_log_of_the_real_pool(
    workload: Workload, max_concurrent: int, timeout: float | None, buffer: int,
    pace: float, cancels: list[tuple[float, int]],
) -> None:
    log = trio.run(_play, workload, max_concurrent, timeout, buffer, pace, sorted(cancels),
                   clock=trio.testing.MockClock(autojump_threshold=0))
    report = check_events(log, max_concurrent=max_concurrent)
    assert report.peak_concurrency <= max_concurrent
