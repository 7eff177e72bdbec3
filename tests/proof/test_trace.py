"""The proof follows the design (issue 16, item 5): for random workloads on a real
pool (tests/proof/_workload.py), the trio shell's trace of effects matches what the
pool core predicts.

The pool's core is traced: every call the shell makes into it (arguments, and the
effects or error it returns) and every list of effects the shell applies, each with
its virtual time and the number of the last barrier (``wait_all_tasks_blocked``)
before it. After every operation, once every task is blocked:

* **the shell applies what the core returns**: each list of effects a core call
  returns is applied by the shell at once, whole, in order, and nothing else is;
* **the core predicts**: the same calls replayed on a fresh ``PoolCore`` (no trio)
  return the same effects and raise the same errors, and its statistics are the
  pool's;
* **the effects are what happens**: the runs blocked in a model call are exactly the
  running tasks holding a slot and lending none; a task is ``done`` exactly when a
  ``Resolve`` was applied, and its ``wait()`` gives what its status says; the
  lifecycle events each task delivers are the ones its effects call for (below).

Lifecycle events, and which orders are legal at one instant: every accepted task
reports ``task_queued``; it reports ``task_started`` only if a ``Grant`` reached it
before any ``CancelRun``; then ``task_finished``, or ``task_cancelled`` when its run
ended cancelled. When the ``Grant`` and the ``CancelRun`` come at the same virtual
instant with no barrier between them, the task's runner may or may not have run in
between (trio's scheduler decides), so ``task_started`` may be there or not; at any
other distance it must be (the autojump clock only moves, and a barrier only
returns, once the runner has run). A stream closed by the workload delivers a prefix.
At the end, each stream's whole log passes ``check_events``.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import event as label
from hypothesis import given
from hypothesis import strategies as st

from agentcore import ModelError
from subagent import (
    Event,
    Pool,
    Stream,
    Task,
    TaskCancelled,
    TaskFailed,
    TaskTimeout,
    open_pool,
)
from subagent._core._core import (
    Arrived,
    CancelRun,
    Grant,
    Node,
    PoolCore,
    Resolve,
    StartRunner,
    TaskStatus,
    WakeFanout,
    WakeSubmitter,
)
from subagent.testing import check_events

from ._workload import BUFFER, STREAMS, Workload

LIFECYCLE = ("task_queued", "task_started", "task_finished", "task_cancelled")
TRACED = [
    "admit",
    "accept",
    "park_submitter",
    "withdraw_submitter",
    "lend",
    "lend_ended",
    "await_child",
    "stop_awaiting",
    "take_back",
    "withdraw",
    "run_ended",
    "resolve",
    "cancel",
    "close",
    "abort",
    "claim_fanout",
    "park_fanout",
    "withdraw_fanout",
    "release_fanout",
    "to_background",
    "settle",
    "read",
    "take_unread",
    "seal",
]


NODE_EFFECTS = (StartRunner, Grant, CancelRun, Resolve, Arrived)


class Token:
    """A parked waiter of the replayed core (the shell parks trio tasks)."""


class Trace:
    """The log of one pool's core calls and applied effects, in order."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, Any, Any, float, int]] = []
        self.tokens: dict[int, int] = {}
        self.keep: list[object] = []  # tokens stay alive, so their ids stay unique
        self.barrier = 0

    def norm(self, value: Any) -> Any:
        """``value`` with nodes as paths and parked tokens as numbers."""
        if isinstance(value, Node):
            return ("node", value.path)
        if isinstance(value, list | tuple):
            return tuple(self.norm(v) for v in value)
        if isinstance(value, NODE_EFFECTS):
            return ("effect", type(value).__name__, self.norm(value.node))
        if isinstance(value, WakeSubmitter | WakeFanout):
            return ("effect", type(value).__name__, self.norm(value.token))
        if not isinstance(value, trio.lowlevel.Task | Token):
            return value  # a status, a number, a flag, a usage value
        if id(value) not in self.tokens:
            self.tokens[id(value)] = len(self.tokens)
            self.keep.append(value)
        return ("token", self.tokens[id(value)])

    def add(self, kind: str, name: str, args: Any, result: Any) -> None:
        self.entries.append((kind, name, (args, result), trio.current_time(), self.barrier))


class TracedCore(PoolCore[Task]):
    """A PoolCore whose public mutators log their calls in ``trace``."""

    trace: Trace
    nested: bool = False


def _traced(name: str) -> Any:
    method = getattr(PoolCore, name)

    def call(self: TracedCore, *args: Any, **kwargs: Any) -> Any:
        if self.nested:  # a core method calling another (abort calls close)
            return method(self, *args, **kwargs)
        trace = self.trace
        shape = trace.norm(args) + tuple(sorted(kwargs.items()))
        if name == "accept":
            node = args[0]
            parent = node.parent.path if node.parent is not None else None
            shape += ((parent, node.depth, node.fanout_limit),)
        self.nested = True
        try:
            result = method(self, *args, **kwargs)
        except Exception as exc:
            trace.add("call", name, shape, ("raise", type(exc).__name__))
            raise
        finally:
            self.nested = False
        trace.add("call", name, shape, trace.norm(result))
        return result

    return call


for _name in TRACED:
    setattr(TracedCore, _name, _traced(_name))


def _is_effects(value: Any) -> bool:
    return isinstance(value, tuple) and all(
        isinstance(e, tuple) and e[:1] == ("effect",) for e in value
    )


def effects_of(result: Any) -> tuple[Any, ...]:
    """The effects in a normalized core result (a list, or a pair ending in one)."""
    if _is_effects(result):
        return tuple(result)
    if isinstance(result, tuple) and len(result) == 2 and _is_effects(result[1]):
        return tuple(result[1])
    return ()


class Replay:
    """A fresh PoolCore (no trio) driven by the traced calls."""

    def __init__(self, pool: Pool) -> None:
        self.core: PoolCore[tuple[str, ...]] = PoolCore(
            pool.max_concurrent, pool.max_queued, pool.max_depth
        )
        self.nodes: dict[tuple[str, ...], Node[tuple[str, ...]]] = {}
        self.tokens: dict[int, object] = {}
        self.done = 0
        self.norm = Trace()

    def arg(self, value: Any) -> Any:
        if isinstance(value, tuple) and len(value) == 2 and value[0] == "node":
            return self.nodes[value[1]]
        if isinstance(value, tuple) and len(value) == 2 and value[0] == "token":
            return self.tokens.setdefault(value[1], Token())
        return value

    def play(self, trace: Trace) -> None:
        calls = [e for e in trace.entries if e[0] == "call"]
        for _, name, (shape, expected), _, _ in calls[self.done :]:
            args, kwargs = [], {}
            for item in shape:
                if (
                    isinstance(item, tuple)
                    and len(item) == 2
                    and item[0] in ("fanout", "background")
                ):
                    kwargs[item[0]] = item[1]
                else:
                    args.append(item)
            if name == "accept":
                (_, path), (parent, depth, limit) = args[0], args[-1]
                node = Node(
                    path,
                    self.nodes.get(parent) if parent else None,
                    path,
                    depth=depth,
                    fanout_limit=limit,
                )
                self.nodes[path] = node
                args = [("node", path)]
            try:
                got = getattr(self.core, name)(*(self.arg(a) for a in args), **kwargs)
            except Exception as exc:
                result: Any = ("raise", type(exc).__name__)
            else:
                result = self.norm.norm(got)
            assert result == self.renumber(expected), (name, shape, result, expected)
            self.done += 1

    def renumber(self, value: Any) -> Any:
        # Tokens are numbered by first sight in each log; map the trace's to ours.
        if isinstance(value, tuple) and len(value) == 2 and value[0] == "token":
            return self.norm.norm(self.tokens.setdefault(value[1], Token()))
        if isinstance(value, tuple):
            return tuple(self.renumber(v) for v in value)
        return value


class Harness:
    """One pool, its traced core, a workload, and the checks."""

    def __init__(
        self,
        data: st.DataObject,
        limits: dict[str, int],
        timeout: float | None,
        max_turns: int,
        steps: int,
    ) -> None:
        self.data = data
        self.limits = limits
        self.timeout = timeout
        self.max_turns = max_turns
        self.steps = steps
        self.trace = Trace()
        self.streams = [Stream(BUFFER) for _ in range(STREAMS)]
        self.closed: set[int] = set()
        self.logs: list[list[Event]] = [[] for _ in range(STREAMS)]
        self.kinds: dict[tuple[str, ...], list[str]] = defaultdict(list)
        self.resolved: set[tuple[str, ...]] = set()

    async def main(self) -> None:
        async with (
            trio.open_nursery() as helpers,
            open_pool(
                max_concurrent=self.limits["max_concurrent"],
                max_queued=self.limits["max_queued"],
                max_depth=self.limits["max_depth"],
                events=self.streams[0],
            ) as pool,
        ):
            pool._core.__class__ = TracedCore
            core: TracedCore = pool._core  # type: ignore[assignment]
            core.trace = self.trace
            apply = pool._apply

            def traced_apply(effects: list[Any]) -> None:
                self.trace.add("apply", "", (), self.trace.norm(effects))
                apply(effects)

            pool._apply = traced_apply  # type: ignore[method-assign]
            # (and the bound _apply its tasks keep: one per pool, taken at its start)
            pool._applier = traced_apply
            self.replay = Replay(pool)
            work = self.work = Workload(self.data, pool, self.streams, self.timeout, self.max_turns)
            await self.check(pool)
            for _ in range(self.steps):
                await work.step(helpers)
                await self.check(pool)
            if self.data.draw(st.booleans(), label="finish by cancel"):
                pool.cancel()
            else:
                pool.close()
                await self.check(pool)
                while work.in_model_call():
                    work.act(work.in_model_call()[0], "complete")
                    await self.check(pool)
            await self.check(pool)
        await self.check(pool)
        stats = pool.statistics()
        assert (stats.running, stats.queued, stats.holding_slots, stats.waiting_submitters) == (
            0,
            0,
            0,
            0,
        )
        assert all(t.done for t in work.tasks.values())
        for index, log in enumerate(self.logs):
            report = check_events(log, max_concurrent=None, complete=index not in self.closed)
            assert report.events == len(log)

    def drain(self) -> None:
        for index, (stream, log) in enumerate(zip(self.streams, self.logs, strict=True)):
            if stream._closed:
                self.closed.add(index)
            while True:
                try:
                    event = stream.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                log.append(event)
                self.kinds[event.path].append(str(event.kind))

    async def check(self, pool: Pool) -> None:
        await trio.testing.wait_all_tasks_blocked()
        self.trace.barrier += 1
        self.drain()
        self.work.learn()
        where = f"after {self.work.ops}"
        self.applied_as_returned(where)
        self.replay.play(self.trace)
        assert pool.statistics() == self.replay.core.statistics(), where
        self.in_model_calls(pool, where)
        for path, task in self.work.tasks.items():
            self.lifecycle(path, task, where)
            if task.done and path not in self.resolved:
                self.resolved.add(path)
                await self.check_result(task)

    def applied_as_returned(self, where: str) -> None:
        entries = self.trace.entries
        for index, (kind, name, (_, result), _, _) in enumerate(entries):
            if kind == "apply":
                before = entries[index - 1]
                assert before[0] == "call" and effects_of(before[2][1]) == result, (
                    before,
                    result,
                    where,
                )
            elif effects_of(result):
                after = entries[index + 1] if index + 1 < len(entries) else None
                assert after is not None and after[0] == "apply", (name, result, where)

    def in_model_calls(self, pool: Pool, where: str) -> None:
        calling = {t.path for t in self.work.in_model_call()}
        holding = {
            path
            for path, node in pool._core.live.items()
            if node.status is TaskStatus.running and node.holds_slot and not node.lending
        }
        assert calling == holding, (calling, holding, where)

    def lifecycle(self, path: tuple[str, ...], task: Task, where: str) -> None:
        first: dict[str, tuple[int, float, int]] = {}
        ended: str | None = None
        for index, (kind, name, (args, result), time, barrier) in enumerate(self.trace.entries):
            if kind == "apply":
                for _, effect, ref in result:
                    if ref == ("node", path):
                        first.setdefault(effect, (index, time, barrier))
            elif name == "run_ended" and args[0] == ("node", path) and result[:1] != ("raise",):
                ended = "task_cancelled" if args[1] is TaskStatus.cancelled else "task_finished"
        grant, cancel = first.get("Grant"), first.get("CancelRun")
        assert "StartRunner" in first, (path, where)
        started = [False]
        if grant is not None and (cancel is None or grant[0] < cancel[0]):
            same_instant = cancel is not None and cancel[1:] == grant[1:]
            started = [True, False] if same_instant else [True]
        candidates = []
        for start in started:
            kinds = ["task_queued", *(["task_started"] if start else [])]
            candidates.append(kinds + ([ended] if ended else []))
        got = [k for k in self.kinds.get(path, []) if k in LIFECYCLE]
        stream = self.streams.index(task.events) if task.events is not None else None
        if stream in self.closed:
            assert any(got == c[: len(got)] for c in candidates), (path, got, candidates, where)
        else:
            assert got in candidates, (path, got, candidates, where)
        assert task.done == ("Resolve" in first), (path, where)

    async def check_result(self, task: Task) -> None:
        errors = {"failed": TaskFailed, "timed_out": TaskTimeout, "cancelled": TaskCancelled}
        try:
            result = await task.wait()
        except (TaskFailed, TaskTimeout, TaskCancelled) as exc:
            assert type(exc) is errors[str(task.status)], (task.path, exc)
            if task.status is TaskStatus.failed:
                assert isinstance(exc.__cause__, ModelError)
        else:
            assert task.status is TaskStatus.finished, (task.path, result)
            # A run that answered says its key; one stopped by max_turns after a
            # delegation has no text.
            reason = str(result.summary.end_reason)
            output = f"out {task.input}" if reason == "stop" else ""
            assert (result.path, result.output, reason) == (
                task.path, output, "stop" if output else "max_turns"), (task.path, result)


@pytest.mark.slow
@given(st.data())
def test_the_shells_trace_matches_the_core(data: st.DataObject) -> None:
    """Random operations on a real pool: its trace of effects is the core's."""
    limits = {
        "max_concurrent": data.draw(st.integers(1, 3), label="max_concurrent"),
        "max_queued": data.draw(st.integers(1, 3), label="max_queued"),
        "max_depth": data.draw(st.integers(1, 3), label="max_depth"),
    }
    harness = Harness(
        data,
        limits,
        data.draw(st.sampled_from([None, 4.0, 9.0]), label="timeout"),
        data.draw(st.sampled_from([2, 3, 20]), label="max_turns"),
        data.draw(st.integers(5, 50), label="steps"),
    )
    trio.run(harness.main, clock=trio.testing.MockClock(autojump_threshold=0))
    tasks = harness.work.tasks.values()
    label(f"statuses: {sorted({str(t.status) for t in tasks})}")
    label(f"deepest: {max((len(t.path) for t in tasks), default=0)}")
    for op in sorted({op.split("(")[0].split(" ")[0] for op in harness.work.ops}):
        label(f"op: {op}")
    both = itertools.chain.from_iterable(harness.kinds.values())
    label(f"lifecycle events: {sum(1 for k in both if k in LIFECYCLE) > 0}")
